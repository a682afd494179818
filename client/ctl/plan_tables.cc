// Buffer, bucket and piece tables of zshardctl plan.
#include "client/ctl/plan_tables.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "client/ctl/table.h"

namespace zshard::ctl {

std::string BufferTables(const plan::Plan& p) {
  Table buffers({"buffer", "param", "grad", "expert", "group", "numel",
                 "padding", "buckets", "params"});
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    const plan::Buffer& buf = p.buffers[b];
    int64_t unpadded = 0;
    for (const plan::Bucket& k : buf.buckets) unpadded += k.numel_unpadded;
    buffers.AddRow(
        {absl::StrCat(b), plan::DTypeName(buf.key.param_dtype),
         plan::DTypeName(buf.key.grad_dtype), buf.key.expert ? "yes" : "no",
         absl::StrCat(buf.shard_group_size), Grouped(buf.numel),
         Grouped(buf.numel - unpadded), absl::StrCat(buf.buckets.size()),
         absl::StrCat(buf.params.size())});
  }
  std::string out = buffers.Render() + "\n";
  Table buckets(
      {"buffer", "bucket", "start", "end", "unpadded", "shard", "params"});
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    const plan::Buffer& buf = p.buffers[b];
    std::vector<int> count(buf.buckets.size(), 0);
    for (const plan::ParamSlot& s : buf.params) ++count[s.bucket];
    for (size_t k = 0; k < buf.buckets.size(); ++k) {
      const plan::Bucket& bk = buf.buckets[k];
      buckets.AddRow({absl::StrCat(b), absl::StrCat(k), Grouped(bk.start),
                      Grouped(bk.end), Grouped(bk.numel_unpadded),
                      Grouped((bk.end - bk.start) / buf.shard_group_size),
                      absl::StrCat(count[k])});
    }
  }
  return out + buckets.Render() + "\n";
}

std::string PiecesTable(const plan::ModelSpec& model, const plan::RankPlan& r) {
  Table pieces({"buffer", "bucket", "shard", "param", "param elements"});
  for (const plan::Shard& s : r.shards) {
    const std::string window =
        absl::StrCat("[", Grouped(s.start), ", ", Grouped(s.end), ")");
    if (s.pieces.empty()) {
      pieces.AddRow({absl::StrCat(s.buffer), absl::StrCat(s.bucket), window,
                     "(padding)", ""});
    }
    for (const plan::Piece& pc : s.pieces) {
      pieces.AddRow({absl::StrCat(s.buffer), absl::StrCat(s.bucket), window,
                     model.params[pc.param_index].name,
                     absl::StrCat("[", Grouped(pc.param_start), ", ",
                                  Grouped(pc.param_end), ")")});
    }
  }
  return pieces.Render();
}

Owned OwnedBy(const plan::RankPlan& r) {
  Owned o;
  for (const plan::Shard& s : r.shards) {
    o.pieces += s.pieces.size();
    for (const plan::Piece& pc : s.pieces) o.elements += pc.end - pc.start;
  }
  return o;
}

}  // namespace zshard::ctl
