// etcd v3 JSON gateway client: request and response shapes, endpoint
// failover. Int64 fields travel as JSON strings, keys and values as base64.
#include "server/store/etcd_client.h"

#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "nlohmann/json.hpp"
#include "server/store/http_request.h"

namespace zshard::server {
namespace {

using nlohmann::json;

std::string B64(const std::string& s) { return absl::Base64Escape(s); }

// The gateway's answers are read without exceptions: a field of the wrong
// type or a missing one reads as its zero value (null, false, 0, "").

// j[field] when j is an object that has it, else null.
const json& Field(const json& j, const char* field) {
  static const json* const kNull = new json();
  if (!j.is_object()) return *kNull;
  auto it = j.find(field);
  return it == j.end() ? *kNull : *it;
}

bool Bool(const json& j, const char* field) {
  const json& v = Field(j, field);
  return v.is_boolean() && v.get<bool>();
}

std::string String(const json& j, const char* field) {
  const json& v = Field(j, field);
  return v.is_string() ? v.get<std::string>() : std::string();
}

std::string UnB64(const json& j, const char* field) {
  std::string out;
  absl::Base64Unescape(String(j, field), &out);
  return out;
}

// Reads an int64 field that the gateway writes as a string (or a number).
int64_t Int(const json& j, const char* field) {
  const json& v = Field(j, field);
  if (v.is_number_integer()) return v.get<int64_t>();
  int64_t n = 0;
  if (v.is_string() && absl::SimpleAtoi(v.get<std::string>(), &n)) return n;
  return 0;
}

absl::StatusOr<json> ParseBody(const std::string& body,
                               const std::string& what) {
  // Streaming endpoints (lease keepalive) answer one JSON object per line.
  json j = json::parse(body.substr(0, body.find('\n')), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InternalError(
        absl::StrCat("etcd answered ", what, " with something not JSON"));
  }
  return j;
}

EtcdRangeResult ReadRange(const json& j) {
  EtcdRangeResult r;
  r.revision = Int(Field(j, "header"), "revision");
  r.more = Bool(j, "more");
  const json& kvs = Field(j, "kvs");
  if (!kvs.is_array()) return r;
  for (const json& kv : kvs) {
    EtcdKeyValue out;
    out.key = UnB64(kv, "key");
    out.value = UnB64(kv, "value");
    out.create_revision = Int(kv, "create_revision");
    out.mod_revision = Int(kv, "mod_revision");
    out.version = Int(kv, "version");
    out.lease = Int(kv, "lease");
    r.kvs.push_back(std::move(out));
  }
  return r;
}

json RangeJson(const EtcdRange& range) {
  json j = {{"key", B64(range.key)}};
  if (!range.range_end.empty()) j["range_end"] = B64(range.range_end);
  if (range.revision > 0) j["revision"] = std::to_string(range.revision);
  if (range.limit > 0) j["limit"] = std::to_string(range.limit);
  if (range.descend) {
    j["sort_order"] = "DESCEND";
    j["sort_target"] = "KEY";
  }
  return j;
}

json OpJson(const EtcdOp& op) {
  switch (op.kind) {
    case EtcdOp::Kind::kPut: {
      json put = {{"key", B64(op.key)}, {"value", B64(op.value)}};
      if (op.lease != 0) put["lease"] = std::to_string(op.lease);
      return {{"request_put", put}};
    }
    case EtcdOp::Kind::kDelete: {
      json del = {{"key", B64(op.key)}};
      if (!op.range_end.empty()) del["range_end"] = B64(op.range_end);
      return {{"request_delete_range", del}};
    }
    case EtcdOp::Kind::kRange: {
      EtcdRange range;
      range.key = op.key;
      range.range_end = op.range_end;
      return {{"request_range", RangeJson(range)}};
    }
  }
  return json::object();
}

json CompareJson(const EtcdCompare& c) {
  static constexpr const char* kResults[] = {"EQUAL", "NOT_EQUAL", "GREATER",
                                             "LESS"};
  json j = {{"key", B64(c.key)},
            {"result", kResults[static_cast<int>(c.result)]}};
  switch (c.target) {
    case EtcdCompare::Target::kCreate:
      j["target"] = "CREATE";
      j["create_revision"] = std::to_string(c.number);
      break;
    case EtcdCompare::Target::kMod:
      j["target"] = "MOD";
      j["mod_revision"] = std::to_string(c.number);
      break;
    case EtcdCompare::Target::kVersion:
      j["target"] = "VERSION";
      j["version"] = std::to_string(c.number);
      break;
    case EtcdCompare::Target::kValue:
      j["target"] = "VALUE";
      j["value"] = B64(c.value);
      break;
  }
  return j;
}

}  // namespace

EtcdOp EtcdOp::Put(std::string key, std::string value, int64_t lease) {
  EtcdOp op;
  op.kind = Kind::kPut;
  op.key = std::move(key);
  op.value = std::move(value);
  op.lease = lease;
  return op;
}

EtcdOp EtcdOp::Delete(std::string key, std::string range_end) {
  EtcdOp op;
  op.kind = Kind::kDelete;
  op.key = std::move(key);
  op.range_end = std::move(range_end);
  return op;
}

EtcdOp EtcdOp::Get(std::string key, std::string range_end) {
  EtcdOp op;
  op.kind = Kind::kRange;
  op.key = std::move(key);
  op.range_end = std::move(range_end);
  return op;
}

absl::StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Create(
    EtcdClientOptions options) {
  if (options.endpoints.empty()) {
    return absl::InvalidArgumentError("no etcd endpoint given");
  }
  for (const std::string& e : options.endpoints) {
    size_t colon = e.rfind(':');
    int port = 0;
    if (colon == std::string::npos || colon == 0 ||
        !absl::SimpleAtoi(e.substr(colon + 1), &port) || port <= 0 ||
        port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("etcd endpoint '", e, "' is not HOST:PORT"));
    }
  }
  std::shared_ptr<HttpTls> tls;
  if (!options.tls.ca_file.empty() || !options.tls.cert_file.empty()) {
    ZSHARD_ASSIGN_OR_RETURN(tls, HttpTls::Create(options.tls));
  }
  return std::unique_ptr<EtcdClient>(
      new EtcdClient(std::move(options), std::move(tls)));
}

EtcdClient::EtcdClient(EtcdClientOptions options, std::shared_ptr<HttpTls> tls)
    : options_(std::move(options)), tls_(std::move(tls)) {
  for (const std::string& e : options_.endpoints) {
    const size_t colon = e.rfind(':');
    Endpoint ep;
    ep.address = e;
    ep.host = e.substr(0, colon);
    if (ep.host.size() > 2 && ep.host.front() == '[' && ep.host.back() == ']') {
      ep.host = ep.host.substr(1, ep.host.size() - 2);
    }
    (void)absl::SimpleAtoi(e.substr(colon + 1), &ep.port);
    endpoints_.push_back(std::move(ep));
  }
}

EtcdClient::~EtcdClient() = default;

absl::StatusOr<std::string> EtcdClient::Post(const std::string& path,
                                             const std::string& body) {
  size_t start = 0;
  {
    absl::MutexLock lock(&mu_);
    start = current_;
  }
  std::vector<std::string> failures;
  for (size_t i = 0; i < endpoints_.size(); ++i) {
    const size_t index = (start + i) % endpoints_.size();
    const Endpoint& ep = endpoints_[index];
    HttpRequestOptions request;
    request.host = ep.host;
    request.port = ep.port;
    request.path = path;
    request.body = body;
    request.connect_timeout_ms = options_.connect_timeout_ms;
    request.request_timeout_ms = options_.request_timeout_ms;
    request.tls = tls_;
    absl::StatusOr<HttpResponse> res = HttpRequest(request);
    if (!res.ok()) {
      failures.push_back(absl::StrCat(
          "etcd ", ep.address, " unreachable: ", res.status().message()));
      continue;
    }
    if (res->status == 200) {
      absl::MutexLock lock(&mu_);
      current_ = index;
      return std::move(res->body);
    }
    const json err = json::parse(res->body, nullptr, false);
    std::string message = String(err, "message");
    if (message.empty()) message = absl::StrCat("http status ", res->status);
    int64_t code = Int(err, "code");
    if (code < 1 || code > 16) code = 2;
    std::string line = absl::StrCat("etcd ", ep.address, ": ", message);
    if (code == static_cast<int>(absl::StatusCode::kUnavailable)) {
      failures.push_back(line);  // e.g. no leader: another member may serve
      continue;
    }
    absl::MutexLock lock(&mu_);
    current_ = index;
    return absl::Status(static_cast<absl::StatusCode>(code), line);
  }
  return absl::UnavailableError(absl::StrJoin(failures, "; "));
}

absl::StatusOr<EtcdRangeResult> EtcdClient::Range(const EtcdRange& range) {
  ZSHARD_ASSIGN_OR_RETURN(std::string body,
                          Post("/v3/kv/range", RangeJson(range).dump()));
  ZSHARD_ASSIGN_OR_RETURN(json j, ParseBody(body, "a range"));
  return ReadRange(j);
}

absl::StatusOr<EtcdRangeResult> EtcdClient::RangePrefix(
    const std::string& prefix, int64_t revision) {
  EtcdRange range;
  range.key = prefix;
  range.range_end = PrefixEnd(prefix);
  range.revision = revision;
  return Range(range);
}

absl::StatusOr<EtcdTxnResult> EtcdClient::Txn(
    const std::vector<EtcdCompare>& compares,
    const std::vector<EtcdOp>& success, const std::vector<EtcdOp>& failure) {
  json req = json::object();
  json c = json::array();
  for (const EtcdCompare& compare : compares) c.push_back(CompareJson(compare));
  json s = json::array();
  for (const EtcdOp& op : success) s.push_back(OpJson(op));
  json f = json::array();
  for (const EtcdOp& op : failure) f.push_back(OpJson(op));
  req["compare"] = std::move(c);
  req["success"] = std::move(s);
  req["failure"] = std::move(f);
  const std::string text = req.dump();
  absl::StatusOr<std::string> body = Post("/v3/kv/txn", text);
  if (!body.ok()) {
    if (body.status().code() == absl::StatusCode::kInvalidArgument) {
      // Too many ops or too large: say what was sent and what to raise.
      return absl::InvalidArgumentError(absl::StrCat(
          body.status().message(), " (a transaction of ",
          success.size() + failure.size(), " ops, ", text.size(),
          " bytes; etcd's --max-txn-ops and --max-request-bytes bound it)"));
    }
    return body.status();
  }
  ZSHARD_ASSIGN_OR_RETURN(json j, ParseBody(*body, "a transaction"));
  EtcdTxnResult r;
  r.succeeded = Bool(j, "succeeded");
  r.revision = Int(Field(j, "header"), "revision");
  const json& responses = Field(j, "responses");
  if (!responses.is_array()) return r;
  for (const json& resp : responses) {
    const json& range = Field(resp, "response_range");
    if (range.is_object()) r.ranges.push_back(ReadRange(range));
  }
  return r;
}

absl::StatusOr<int64_t> EtcdClient::Grant(int64_t ttl_s) {
  json req = {{"TTL", std::to_string(ttl_s)}};
  ZSHARD_ASSIGN_OR_RETURN(std::string body,
                          Post("/v3/lease/grant", req.dump()));
  ZSHARD_ASSIGN_OR_RETURN(json j, ParseBody(body, "a lease grant"));
  if (const std::string error = String(j, "error"); !error.empty()) {
    return absl::UnavailableError(absl::StrCat("etcd lease grant: ", error));
  }
  const int64_t id = Int(j, "ID");
  if (id == 0) return absl::InternalError("etcd granted a lease without an id");
  return id;
}

absl::StatusOr<int64_t> EtcdClient::KeepAlive(int64_t lease) {
  json req = {{"ID", std::to_string(lease)}};
  ZSHARD_ASSIGN_OR_RETURN(std::string body,
                          Post("/v3/lease/keepalive", req.dump()));
  ZSHARD_ASSIGN_OR_RETURN(json j, ParseBody(body, "a lease keepalive"));
  const int64_t ttl = Int(Field(j, "result"), "TTL");
  if (ttl <= 0) {
    return absl::NotFoundError(
        absl::StrCat("etcd lease ", lease, " expired or was revoked"));
  }
  return ttl;
}

absl::Status EtcdClient::Revoke(int64_t lease) {
  json req = {{"ID", std::to_string(lease)}};
  absl::StatusOr<std::string> body = Post("/v3/lease/revoke", req.dump());
  if (!body.ok() && body.status().code() == absl::StatusCode::kNotFound) {
    return absl::OkStatus();
  }
  return body.status();
}

std::string EtcdClient::PrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    unsigned char last = static_cast<unsigned char>(end.back());
    if (last < 0xff) {
      end.back() = static_cast<char>(last + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

}  // namespace zshard::server
