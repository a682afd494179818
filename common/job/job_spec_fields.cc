// The job spec's field table, and the reading, writing and Markdown that
// come from it.
#include "common/job/job_spec_fields.h"

#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/job/lr_schedule.h"
#include "common/job/workload_kind.h"
#include "common/status.h"

namespace zshard::job {
namespace {

// Limits that more than one row shares.
constexpr int64_t kMaxWorld = 65536;
constexpr int64_t kMinLeaseMs = 100;
constexpr int64_t kHourMs = 3600000;
constexpr int64_t kDayMs = 86400000;
constexpr int64_t kMaxCount = std::numeric_limits<int64_t>::max() / 2;
constexpr int64_t kMaxScheduleSteps = int64_t{1} << 50;
constexpr double kBig = 1e30;
constexpr double kBelowOne = 0.999999999;

const JobSpec& DefaultSpec() {
  static const JobSpec* const kDefault = new JobSpec();
  return *kDefault;
}

// The member that the chain of member pointers First, Rest... names in
// `object` (spec.*First.*Rest...).
template <auto First, auto... Rest, typename T>
auto& Member(T& object) {
  if constexpr (sizeof...(Rest) == 0) {
    return object.*First;
  } else {
    return Member<Rest...>(object.*First);
  }
}

// A row under construction; the table slices it to its JobSpecField.
struct Row : JobSpecField {
  // `text` is what the docs show as the default.
  Row Required(const char* text) const {
    Row r = *this;
    r.required = true;
    r.default_doc = text;
    return r;
  }
  Row MinExclusive() const {
    Row r = *this;
    r.min_exclusive = true;
    return r;
  }
  Row Relate(void (*fn)(const JobSpec&, FieldRule&), const char* default_text,
             const char* range_text) const {
    Row r = *this;
    r.relate = fn;
    r.default_doc = default_text;
    r.range_doc = range_text;
    return r;
  }
  Row Omit(bool (*fn)(const JobSpec&), const char* text) const {
    Row r = *this;
    r.omitted = fn;
    r.omitted_doc = text;
    return r;
  }
};

Row Base(const char* path, FieldType type, const char* doc) {
  Row r;
  r.path = path;
  r.type = type;
  r.doc = doc;
  return r;
}

template <auto... M>
Row Int(const char* path, int64_t min, int64_t max, const char* doc) {
  Row r = Base(path, FieldType::kInteger, doc);
  r.int_min = min;
  r.int_max = max;
  r.get = [](const JobSpec& s) -> nlohmann::json {
    return static_cast<int64_t>(Member<M...>(s));
  };
  r.set = [](JobSpec& s, const nlohmann::json& v) -> absl::Status {
    auto& field = Member<M...>(s);
    field =
        static_cast<std::remove_reference_t<decltype(field)>>(v.get<int64_t>());
    return absl::OkStatus();
  };
  return r;
}

template <auto... M>
Row Number(const char* path, double min, double max, const char* doc) {
  Row r = Base(path, FieldType::kNumber, doc);
  r.min = min;
  r.max = max;
  r.get = [](const JobSpec& s) -> nlohmann::json { return Member<M...>(s); };
  r.set = [](JobSpec& s, const nlohmann::json& v) -> absl::Status {
    Member<M...>(s) = v.get<double>();
    return absl::OkStatus();
  };
  return r;
}

template <auto... M>
Row Bool(const char* path, const char* doc) {
  Row r = Base(path, FieldType::kBoolean, doc);
  r.get = [](const JobSpec& s) -> nlohmann::json { return Member<M...>(s); };
  r.set = [](JobSpec& s, const nlohmann::json& v) -> absl::Status {
    Member<M...>(s) = v.get<bool>();
    return absl::OkStatus();
  };
  return r;
}

template <auto... M>
Row String(const char* path, size_t max_len, const char* doc) {
  Row r = Base(path, FieldType::kString, doc);
  r.max_len = max_len;
  r.get = [](const JobSpec& s) -> nlohmann::json { return Member<M...>(s); };
  r.set = [](JobSpec& s, const nlohmann::json& v) -> absl::Status {
    Member<M...>(s) = v.get<std::string>();
    return absl::OkStatus();
  };
  return r;
}

// An enum written as its name: Name(value) gives the name, Parse(name) the
// value or InvalidArgument naming the field; the values are 0 .. N - 1.
template <auto Name, auto Parse, int N, auto... M>
Row Enum(const char* path, size_t max_len, const char* doc) {
  using E =
      std::remove_reference_t<decltype(Member<M...>(std::declval<JobSpec&>()))>;
  Row r = Base(path, FieldType::kEnum, doc);
  r.max_len = max_len;
  r.choices = N;
  r.choice = [](int index) -> const char* {
    return Name(static_cast<E>(index));
  };
  r.get = [](const JobSpec& s) -> nlohmann::json {
    return Name(Member<M...>(s));
  };
  r.set = [](JobSpec& s, const nlohmann::json& v) -> absl::Status {
    ZSHARD_ASSIGN_OR_RETURN(Member<M...>(s), Parse(v.get<std::string>()));
    return absl::OkStatus();
  };
  return r;
}

// The cross-field rules of the lease rows and of world.resize. Each row's
// default_doc and range_doc state its rule.
void HeartbeatBelowLease(const JobSpec& spec, FieldRule& rule) {
  rule.int_max = spec.lease_timeout_ms - 1;
}

void TransitionTimeoutFromLease(const JobSpec& spec, FieldRule& rule) {
  rule.fallback = DefaultTransitionTimeoutMs(spec.lease_timeout_ms);
  rule.int_min = spec.lease_timeout_ms;
}

void TransitionSettleFromLease(const JobSpec& spec, FieldRule& rule) {
  rule.fallback = DefaultTransitionSettleMs(spec.lease_timeout_ms);
  rule.int_max = spec.lease_timeout_ms / 2;
}

void ResizeFromInstances(const JobSpec& spec, FieldRule& rule) {
  rule.fallback = ResizePolicyName(DefaultResizePolicy(spec.world.instances));
}

// The fields JobSpecToJson leaves out, so that older job files keep their
// serialisation (and hash).
bool ModelIsInline(const JobSpec& spec) { return spec.model_preset.empty(); }

template <int plan::ParallelSizes::*M>
bool ParallelIsOne(const JobSpec& spec) {
  return spec.parallel.*M == 1;
}

bool ScheduleIsPlain(const JobSpec& spec) {
  const LrSchedule& s = spec.optimizer.lr_schedule;
  return s.kind == LrScheduleKind::kConstant && s.warmup_steps == 0;
}

bool ResizeIsDefault(const JobSpec& spec) {
  return spec.world.resize == DefaultResizePolicy(spec.world.instances);
}

bool TrainerTimeoutUnused(const JobSpec& spec) {
  return spec.workload.kind != WorkloadKind::kTrainer &&
         spec.workload.trainer_timeout_ms ==
             DefaultSpec().workload.trainer_timeout_ms;
}

constexpr char kParallelOne[] = "Left out of the serialised spec when it is 1.";

constexpr char kPlainSchedule[] =
    "Left out of the serialised spec, with the whole lr_schedule, when the "
    "schedule is constant without warmup.";

const std::vector<JobSpecField>& Table() {
  using plan::LayoutOptions;
  // The derived defaults in words, from the constants that define them.
  static const std::string* const kTimeoutDefault = new std::string(
      absl::StrCat(kDefaultTransitionTimeoutLeases, " x lease_timeout_ms"));
  static const std::string* const kSettleDefault = new std::string(absl::StrCat(
      "min(", kDefaultTransitionSettleMs, ", lease_timeout_ms / 2)"));
  static const std::vector<JobSpecField>* const kTable = new std::vector<
      JobSpecField>{
      String<&JobSpec::name>(
          "name", 128,
          "The job's name: letters, digits, '.', '_' and '-', at least one.")
          .Required("required"),
      String<&JobSpec::model_preset>(
          "model.preset", 128,
          "A built-in model by name (gpt2-small, for example). The model is "
          "either {\"preset\": NAME} or an inline {\"params\": [...]} "
          "({\"slots\": [...]} in a model-parallel job), exactly one. A job of "
          "workload 'trainer' may leave the "
          "model out: it takes the model of the first trainer that attaches "
          "to a worker (stored with the job), and every later trainer must "
          "match it.")
          .Required("required, or model.params or model.slots (optional for "
                    "a trainer job)")
          .Omit(&ModelIsInline,
                "An inline model is written as its params instead."),
      Int<&JobSpec::parallel, &plan::ParallelSizes::tensor>(
          "parallel.tensor", 1, kMaxWorld,
          "Tensor-parallel size T. With any of tensor, pipeline and context "
          "above 1 the job is model-parallel: its model is model.slots, one "
          "{\"tp\", \"pp\", \"params\"} entry per slot (T x P of them), "
          "or a Llama-family model.preset split as Megatron splits it; "
          "world.max and world.min must be multiples of T x P x C and "
          "world.instances must divide R x C = world.max / (T x P).")
          .Omit(&ParallelIsOne<&plan::ParallelSizes::tensor>, kParallelOne),
      Int<&JobSpec::parallel, &plan::ParallelSizes::pipeline>(
          "parallel.pipeline", 1, kMaxWorld,
          "Pipeline-parallel size P: the model's layers in P stages.")
          .Omit(&ParallelIsOne<&plan::ParallelSizes::pipeline>, kParallelOne),
      Int<&JobSpec::parallel, &plan::ParallelSizes::context>(
          "parallel.context", 1, kMaxWorld,
          "Context-parallel size C: every slot's optimizer state is sharded "
          "over R x C workers, its data-parallel domain.")
          .Omit(&ParallelIsOne<&plan::ParallelSizes::context>, kParallelOne),
      Int<&JobSpec::layout, &LayoutOptions::bucket_size>(
          "layout.bucket_size", 0, int64_t{1} << 40,
          "Bucket size in elements. 0 means max(40,000,000, 1,000,000 x "
          "world.max) elements, fixed for the job's life."),
      Bool<&JobSpec::layout, &LayoutOptions::grad_reduce_in_fp32>(
          "layout.grad_reduce_in_fp32",
          "Gradients are reduced in fp32 whatever the param dtype."),
      Bool<&JobSpec::layout, &LayoutOptions::pad_for_high_nccl_busbw>(
          "layout.pad_for_high_nccl_busbw",
          "Pad buckets to lcm(D, 128, 65536) instead of lcm(D, 128)."),
      Int<&JobSpec::layout, &LayoutOptions::expert_parallel>(
          "layout.expert_parallel", 1, kMaxWorld,
          "The expert-parallel size E: expert buffers are sharded over D / E "
          "ranks. It must divide world.max / world.instances."),
      Number<&JobSpec::optimizer, &OptimizerSpec::lr>(
          "optimizer.lr", 0.0, kBig,
          "Adam's learning rate, the base rate of the lr_schedule.")
          .MinExclusive(),
      Number<&JobSpec::optimizer, &OptimizerSpec::beta1>(
          "optimizer.beta1", 0.0, kBelowOne,
          "Adam's decay rate of the first moment (m)."),
      Number<&JobSpec::optimizer, &OptimizerSpec::beta2>(
          "optimizer.beta2", 0.0, kBelowOne,
          "Adam's decay rate of the second moment (v)."),
      Number<&JobSpec::optimizer, &OptimizerSpec::eps>(
          "optimizer.eps", 0.0, kBig, "Adam's epsilon, added to the root of v.")
          .MinExclusive(),
      Number<&JobSpec::optimizer, &OptimizerSpec::weight_decay>(
          "optimizer.weight_decay", 0.0, kBig,
          "Decoupled weight decay (AdamW)."),
      Number<&JobSpec::optimizer, &OptimizerSpec::clip_grad_norm>(
          "optimizer.clip_grad_norm", 0.0, kBig,
          "The gradients' global norm is clipped to this; 0 disables "
          "clipping."),
      Enum<&LrScheduleKindName, &ParseLrScheduleKind, 3, &JobSpec::optimizer,
           &OptimizerSpec::lr_schedule, &LrSchedule::kind>(
          "optimizer.lr_schedule.kind", 16,
          "The rate of training step t (1-based) after the warmup: constant "
          "keeps lr; cosine and linear decay to min_lr at decay_steps, with "
          "r = (t - warmup_steps) / (decay_steps - warmup_steps), as min_lr + "
          "(lr - min_lr) x 0.5 (1 + cos(pi r)) and min_lr + (lr - min_lr) (1 "
          "- r); past decay_steps the rate is min_lr. Every rank evaluates it "
          "from the step alone, so re-shards never change it.")
          .Omit(&ScheduleIsPlain, kPlainSchedule),
      Int<&JobSpec::optimizer, &OptimizerSpec::lr_schedule,
          &LrSchedule::warmup_steps>(
          "optimizer.lr_schedule.warmup_steps", 0, kMaxScheduleSteps,
          "Steps 1 to warmup_steps ramp linearly from lr / warmup_steps to "
          "lr; 0: no warmup.")
          .Omit(&ScheduleIsPlain, kPlainSchedule),
      Int<&JobSpec::optimizer, &OptimizerSpec::lr_schedule,
          &LrSchedule::decay_steps>(
          "optimizer.lr_schedule.decay_steps", 0, kMaxScheduleSteps,
          "cosine and linear: the step at which the rate reaches min_lr, "
          "greater than warmup_steps. It must be 0 for constant.")
          .Omit(&ScheduleIsPlain, kPlainSchedule),
      Number<&JobSpec::optimizer, &OptimizerSpec::lr_schedule,
             &LrSchedule::min_lr>(
          "optimizer.lr_schedule.min_lr", 0.0, kBig,
          "cosine and linear: the rate after decay_steps, at most "
          "optimizer.lr. It must be 0 for constant.")
          .Omit(&ScheduleIsPlain, kPlainSchedule),
      Int<&JobSpec::world, &WorldSpec::instances>(
          "world.instances", 1, kMaxWorld,
          "The instance count I, which must divide world.max; the shard group "
          "is D = world.max / I."),
      Int<&JobSpec::world, &WorldSpec::min>(
          "world.min", 1, kMaxWorld,
          "The smallest world the job runs at; at most world.max."),
      Int<&JobSpec::world, &WorldSpec::max>(
          "world.max", 1, kMaxWorld,
          "The largest world; it fixes the default bucket size."),
      Enum<&ResizePolicyName, &ParseResizePolicy, 2, &JobSpec::world,
           &WorldSpec::resize>(
          "world.resize", 16,
          "The world policy. keep_d keeps the shard group D = max / "
          "instances: the world is whole instances of D, a failed rank with "
          "no spare dissolves its instance and joiners wait as spares until D "
          "of them form one. keep_i keeps I = instances: the world is the "
          "largest multiple of I that fits, and D follows it.")
          .Relate(&ResizeFromInstances,
                  "keep_d when world.instances >= 2, else keep_i", nullptr)
          .Omit(&ResizeIsDefault,
                "Left out of the serialised spec when it is the default."),
      Int<&JobSpec::lease_timeout_ms>(
          "lease_timeout_ms", kMinLeaseMs, kHourMs,
          "A member that sends no heartbeat for this long is declared dead."),
      Int<&JobSpec::heartbeat_interval_ms>(
          "heartbeat_interval_ms", 10, kHourMs - 1,
          "How often each worker sends a heartbeat (the coordinator tells "
          "workers as they join); below lease_timeout_ms.")
          .Relate(&HeartbeatBelowLease, nullptr, "[{min}, lease_timeout_ms)"),
      Int<&JobSpec::transition_timeout_ms>(
          "transition_timeout_ms", kMinLeaseMs, kDayMs,
          "Bounds every wait of a transition: a proposal whose PREPARED acks, "
          "or a committed epoch whose ACTIVE acks, are not all in by then is "
          "given up with a timeout event naming who did not answer, and the "
          "coordinator proposes again. At least one lease.")
          .Relate(&TransitionTimeoutFromLease, kTimeoutDefault->c_str(),
                  "[lease_timeout_ms, {max}]"),
      Int<&JobSpec::transition_settle_ms>(
          "transition_settle_ms", 0, kHourMs / 2,
          "Coalesces membership changes: joins, leaves, deaths and drains "
          "that arrive within it of each other are gathered into one "
          "proposal, made once that long passes without a change or ten "
          "times that long after the first (a hundred times while the job "
          "forms); a change that alters the world of a proposal in flight "
          "supersedes it. 0 proposes at each change. At most half a lease.")
          .Relate(&TransitionSettleFromLease, kSettleDefault->c_str(),
                  "[{min}, lease_timeout_ms / 2]"),
      Number<&JobSpec::isolation_fraction>(
          "isolation_fraction", 0, 1,
          "When more than this fraction of the live members (at least 3 "
          "live) are past their lease at once, the coordinator judges itself "
          "cut off from them, not them dead: it declares no one dead, "
          "records an isolated event and waits; members still silent one "
          "lease after the rest came back are declared dead. 1: never.")
          .MinExclusive(),
      Int<&JobSpec::link_quarantine_ms>(
          "link_quarantine_ms", 0, kDayMs,
          "A member excluded because its link to a peer failed twice is not "
          "placed in a world with that peer again for this long."),
      Enum<&WorkloadKindName, &ParseWorkloadKind, 4, &JobSpec::workload,
           &WorkloadSpec::kind>(
          "workload.kind", 64,
          "What produces the gradients: idle steps a counter and does no "
          "math; synthetic and regression are built-in workloads (regression "
          "runs only its two-layer MLP model); trainer takes them from a "
          "user's training process attached to each worker."),
      Int<&JobSpec::workload, &WorkloadSpec::steps>(
          "workload.steps", 0, kMaxCount,
          "The job's length in steps; 0 runs until stopped."),
      Int<&JobSpec::workload, &WorkloadSpec::global_batch>(
          "workload.global_batch", 1, int64_t{1} << 30,
          "The global batch B: the samples of one step."),
      Int<&JobSpec::workload, &WorkloadSpec::step_delay_ms>(
          "workload.step_delay_ms", 0, kHourMs,
          "Paces the built-in workloads: a pause after each step. Trainer "
          "jobs ignore it; their trainers set the pace."),
      Int<&JobSpec::workload, &WorkloadSpec::trainer_timeout_ms>(
          "workload.trainer_timeout_ms", 1000, kDayMs,
          "trainer: how long a daemon waits for its trainer (to attach, to "
          "come back after it died, to finish a forward and backward) before "
          "it hands its state over and leaves. Keep it below the workers' 30 "
          "s collective timeout.")
          .Omit(&TrainerTimeoutUnused,
                "Left out of the serialised spec when the workload is not "
                "trainer and it is the default."),
      String<&JobSpec::checkpoint, &CheckpointSpec::dir>(
          "checkpoint.dir", 4096,
          "Where checkpoints are written; empty: no checkpoints. A "
          "model-parallel job writes each slot's files into slot-S/ of the "
          "step's dir."),
      Int<&JobSpec::checkpoint, &CheckpointSpec::every_steps>(
          "checkpoint.every_steps", 0, kMaxCount,
          "A checkpoint every this many steps; 0: never. Above 0 it needs "
          "checkpoint.dir."),
  };
  return *kTable;
}

// 2^k for powers of two from 2^20 up, 2^k - 1 just below them, else the
// digits.
std::string FormatInt(int64_t v) {
  for (int k = 20; k < 63; ++k) {
    const int64_t p = int64_t{1} << k;
    if (v == p) return absl::StrCat("2^", k);
    if (v == p - 1) return absl::StrCat("2^", k, " - 1");
  }
  return absl::StrCat(v);
}

// The shortest form that reads back the same ("0.001", "1e+30", "0").
std::string FormatNumber(double v) {
  std::string s = nlohmann::json(v).dump();
  if (s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0) {
    s.resize(s.size() - 2);
  }
  return s;
}

const char* TypeName(FieldType type) {
  switch (type) {
    case FieldType::kInteger:
      return "integer";
    case FieldType::kNumber:
      return "number";
    case FieldType::kBoolean:
      return "boolean";
    case FieldType::kString:
    case FieldType::kEnum:
      return "string";
  }
  return "";
}

std::string RangeText(const JobSpecField& row) {
  if (row.range_doc != nullptr) {
    return absl::StrReplaceAll(
        row.range_doc,
        {{"{min}", FormatInt(row.int_min)}, {"{max}", FormatInt(row.int_max)}});
  }
  switch (row.type) {
    case FieldType::kInteger:
      return absl::StrCat("[", FormatInt(row.int_min), ", ",
                          FormatInt(row.int_max), "]");
    case FieldType::kNumber:
      return absl::StrCat(row.min_exclusive ? "(" : "[", FormatNumber(row.min),
                          ", ", FormatNumber(row.max), "]");
    case FieldType::kBoolean:
      return "true, false";
    case FieldType::kString:
      return absl::StrCat("at most ", row.max_len, " characters");
    case FieldType::kEnum: {
      std::string text;
      for (int i = 0; i < row.choices; ++i) {
        absl::StrAppend(&text, i == 0 ? "" : ", ", "`", row.choice(i), "`");
      }
      return text;
    }
  }
  return "";
}

std::string DefaultText(const JobSpecField& row) {
  if (row.default_doc != nullptr) return row.default_doc;
  return absl::StrCat("`", JobSpecFieldDefault(row).dump(), "`");
}

}  // namespace

absl::string_view JobSpecField::Key() const {
  const absl::string_view p(path);
  const size_t dot = p.rfind('.');
  return dot == absl::string_view::npos ? p : p.substr(dot + 1);
}

absl::string_view JobSpecField::Parent() const {
  const absl::string_view p(path);
  const size_t dot = p.rfind('.');
  return dot == absl::string_view::npos ? absl::string_view()
                                        : p.substr(0, dot);
}

absl::Span<const JobSpecField> JobSpecFields() { return Table(); }

const JobSpecField* FindJobSpecField(absl::string_view path) {
  for (const JobSpecField& row : Table()) {
    if (path == row.path) return &row;
  }
  return nullptr;
}

nlohmann::json JobSpecFieldDefault(const JobSpecField& field) {
  return field.get(DefaultSpec());
}

absl::StatusOr<nlohmann::json> ReadJobSpecField(JsonFields& fields,
                                                const JobSpecField& field,
                                                const JobSpec& spec) {
  FieldRule rule;
  rule.fallback = JobSpecFieldDefault(field);
  rule.int_min = field.int_min;
  rule.int_max = field.int_max;
  if (field.relate != nullptr) field.relate(spec, rule);
  const std::string key(field.Key());
  switch (field.type) {
    case FieldType::kInteger:
      return fields.Int(key, rule.fallback.get<int64_t>(), rule.int_min,
                        rule.int_max);
    case FieldType::kNumber:
      return fields.Double(key, rule.fallback.get<double>(), field.min,
                           field.max);
    case FieldType::kBoolean:
      return fields.Bool(key, rule.fallback.get<bool>());
    case FieldType::kString:
    case FieldType::kEnum:
      return fields.String(key, rule.fallback.get<std::string>(),
                           field.max_len);
  }
  return absl::InternalError(
      absl::StrCat("field ", field.path, " has no type"));
}

absl::Status ReadJobSpecFields(JsonFields& fields, JobSpec& spec,
                               absl::string_view through) {
  std::vector<const JobSpecField*> read;
  bool reached = through.empty();
  for (const JobSpecField& row : Table()) {
    if (row.Parent() != fields.path() || fields.Asked(std::string(row.Key()))) {
      continue;
    }
    ZSHARD_ASSIGN_OR_RETURN(const nlohmann::json value,
                            ReadJobSpecField(fields, row, spec));
    ZSHARD_RETURN_IF_ERROR(row.set(spec, value));
    read.push_back(&row);
    if (!through.empty() && row.Key() == through) {
      reached = true;
      break;
    }
  }
  if (!reached) {
    return absl::InternalError(absl::StrCat("the job spec has no field ",
                                            fields.Name(std::string(through))));
  }
  for (const JobSpecField* row : read) {
    if (row->min_exclusive && !(row->get(spec).get<double>() > row->min)) {
      return absl::InvalidArgumentError(
          absl::StrCat(row->path, " must be > ", row->min));
    }
  }
  return absl::OkStatus();
}

void WriteJobSpecFields(const JobSpec& spec, nlohmann::json& json) {
  for (const JobSpecField& row : Table()) {
    if (row.omitted != nullptr && row.omitted(spec)) continue;
    const std::string pointer =
        absl::StrCat("/", absl::StrReplaceAll(row.path, {{".", "/"}}));
    json[nlohmann::json::json_pointer(pointer)] = row.get(spec);
  }
}

std::string JobSpecFieldsMarkdown() {
  std::string out =
      "| Field | Type | Default | Range | Description |\n"
      "| --- | --- | --- | --- | --- |\n";
  for (const JobSpecField& row : Table()) {
    std::string doc = row.doc;
    if (row.omitted_doc != nullptr) absl::StrAppend(&doc, " ", row.omitted_doc);
    absl::StrAppend(&out, "| `", row.path, "` | ", TypeName(row.type), " | ",
                    DefaultText(row), " | ", RangeText(row), " | ", doc,
                    " |\n");
  }
  return out;
}

}  // namespace zshard::job
