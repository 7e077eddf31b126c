// The built-in fusers and the explorer (see fuser.h for the algorithm). Each built-in fuser is a
// small state machine over op kinds (ops.def); none lists op names.
#include "lazy/fuser.h"

#include <mutex>

#include "lazy/custom_op.h"
#include "lazy/log.h"

namespace fusebox::lazy {
namespace {

bool is_pointwise(Op op) { return op_kind(op) <= OpKind::Broadcast; }

bool is_fusion_boundary(const Record& r) { return r.custom && !r.custom->fusible(); }

// Shared bookkeeping: how many records were accepted, how many of them form the best ready prefix.
class KindFuser : public Fuser {
 public:
  FuserStatus status() const override { return closed_ ? FuserStatus::Closed : FuserStatus::Open; }
  FuserProperties properties(const SegmentView& view) const override {
    if (ready_len_ < 2) return {};
    return {fusion_score(view, begin_, begin_ + ready_len_, ready_kernels_), true};
  }
  size_t finish(const SegmentView&) override { return ready_len_; }
  void reset(size_t begin) override {
    begin_ = begin;
    accepted_ = ready_len_ = ready_kernels_ = 0;
    closed_ = false;
    on_reset();
  }
  bool fuse(size_t index, const Record& r) override {
    if (closed_) return false;
    size_t kernels = 0;
    bool ready = false;
    reason_.clear();
    if (!accept(r, &ready, &kernels)) {
      closed_ = true;
      if (reason_.empty()) reason_ = "does not take " + record_name(r) + " (" + std::string(op_kind_name(op_kind(r.op))) + ")";
      return false;
    }
    ++accepted_;
    if (ready) {
      ready_len_ = accepted_;
      ready_kernels_ = kernels;
    }
    return true;
  }

 protected:
  // Accepts the record or not; sets whether the prefix ending here is ready and its kernel count.
  virtual bool accept(const Record& r, bool* ready, size_t* kernels) = 0;
  virtual void on_reset() = 0;
  std::string why_closed() const override { return reason_; }
  size_t accepted_ = 0;
  std::string reason_;  // set when a record is refused (accept may word it)

 private:
  size_t begin_ = 0, ready_len_ = 0, ready_kernels_ = 0;
  bool closed_ = false;
};

// Element-wise DAGs (unary, binary with broadcasting, where, cast, expand): one region, possibly
// with several outputs.
class ElementwiseFuser final : public KindFuser {
 public:
  std::string name() const override { return "elementwise"; }

 protected:
  bool accept(const Record& r, bool* ready, size_t* kernels) override {
    if (!is_pointwise(r.op)) return false;
    *ready = true;
    *kernels = 1;
    return true;
  }
  void on_reset() override {}
};

// A contraction (matmul, conv) with element-wise work after it (its epilogue) and optionally
// element-wise work before it: the group need not open with the contraction.
class EpilogueFuser final : public KindFuser {
 public:
  std::string name() const override { return "epilogue"; }

 protected:
  bool accept(const Record& r, bool* ready, size_t* kernels) override {
    const OpKind k = op_kind(r.op);
    if (k == OpKind::Contraction) {
      if (seen_contraction_) {
        reason_ = "a second contraction (" + record_name(r) + ")";
        return false;
      }
      seen_contraction_ = true;
    } else if (!is_pointwise(r.op)) {
      return false;
    } else if (!seen_contraction_) {
      ++prefix_;
    } else {
      ++epilogue_;
    }
    *ready = seen_contraction_ && epilogue_ > 0;
    *kernels = 1 + (prefix_ > 0 ? 1 : 0);
    return true;
  }
  void on_reset() override {
    seen_contraction_ = false;
    prefix_ = epilogue_ = 0;
  }

 private:
  bool seen_contraction_ = false;
  size_t prefix_ = 0, epilogue_ = 0;
};

// Reductions with the element-wise work they read (fuse-on-read) and the element-wise work that
// reads them back against the unreduced input (the broadcast-back diamond: x - max(x), ...).
class ReductionFuser final : public KindFuser {
 public:
  std::string name() const override { return "reduction"; }

 protected:
  bool accept(const Record& r, bool* ready, size_t* kernels) override {
    const OpKind k = op_kind(r.op);
    if (k == OpKind::Reduce) {
      ++reductions_;
    } else if (!is_pointwise(r.op)) {
      return false;
    }
    *ready = reductions_ > 0;
    *kernels = reductions_;
    return true;
  }
  void on_reset() override { reductions_ = 0; }

 private:
  size_t reductions_ = 0;
};

// Pre-processing: index-only transforms (slice, transpose, flip, pad, resize, reshape, concat)
// mixed with element-wise work: transform regions followed by an element-wise region.
class PreprocessFuser final : public KindFuser {
 public:
  std::string name() const override { return "preprocess"; }

 protected:
  bool accept(const Record& r, bool* ready, size_t* kernels) override {
    const OpKind k = op_kind(r.op);
    if (k == OpKind::Injective) {
      saw_transform_ = true;
    } else if (is_pointwise(r.op)) {
      saw_pointwise_ = true;
    } else {
      return false;
    }
    *ready = saw_transform_;
    *kernels = saw_pointwise_ ? 2 : 1;
    return true;
  }
  void on_reset() override { saw_transform_ = saw_pointwise_ = false; }

 private:
  bool saw_transform_ = false, saw_pointwise_ = false;
};

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::vector<FuserFactory>& user_fusers() {
  static std::vector<FuserFactory> v;
  return v;
}

}  // namespace

void register_fuser(FuserFactory factory) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  user_fusers().push_back(std::move(factory));
}

std::vector<std::unique_ptr<Fuser>> make_fusers() {
  std::vector<std::unique_ptr<Fuser>> out;
  out.push_back(std::make_unique<ElementwiseFuser>());
  out.push_back(std::make_unique<EpilogueFuser>());
  out.push_back(std::make_unique<ReductionFuser>());
  out.push_back(std::make_unique<PreprocessFuser>());
  std::lock_guard<std::mutex> lock(registry_mutex());
  for (const FuserFactory& f : user_fusers()) out.push_back(f());
  return out;
}

double fusion_score(const SegmentView& view, size_t begin, size_t end, size_t kernels, const CostModel& cost) {
  const std::vector<Record>& records = *view.records;
  double saved_bytes = 0;
  for (size_t i = begin; i < end; ++i) {
    for (const StatePtr& s : records[i].outputs) {
      if (!view.escapes(s.get(), begin, end)) saved_bytes += 2.0 * double(s->nbytes());
    }
  }
  const double launches = double(end - begin) - double(kernels);
  const double score = saved_bytes + (launches > 0 ? launches : 0) * cost.launch_cost_bytes;
  return score > 0 ? score : 0;
}

std::vector<Group> explore(const SegmentView& view, std::vector<std::unique_ptr<Fuser>>& fusers) {
  const std::vector<Record>& records = *view.records;
  std::vector<Group> groups;
  size_t p = 0;
  const bool explain = log_level() >= LogLevel::Medium;
  while (p < records.size()) {
    for (auto& f : fusers) f->reset(p);
    for (size_t i = p; i < records.size(); ++i) {
      if (is_fusion_boundary(records[i])) {
        if (explain) {
          for (auto& f : fusers) {
            if (f->status() != FuserStatus::Open) continue;
            log_line("explore @" + std::to_string(p) + ": " + f->name() + " closed at record " + std::to_string(i) +
                     ": " + record_name(records[i]) + " is a custom op without a body (a fusion boundary)");
          }
        }
        break;
      }
      bool any_open = false;
      for (auto& f : fusers) {
        if (f->status() != FuserStatus::Open) continue;
        if (f->fuse(i, records[i])) {
          any_open = true;
        } else if (explain) {
          log_line("explore @" + std::to_string(p) + ": " + f->name() + " closed at record " + std::to_string(i) + ": " +
                   f->why_closed());
        }
      }
      if (!any_open) break;
      if (explain && i + 1 == records.size()) {
        for (auto& f : fusers) {
          if (f->status() == FuserStatus::Open) log_line("explore @" + std::to_string(p) + ": " + f->name() + " open at the segment's end");
        }
      }
    }
    Fuser* best = nullptr;
    double best_score = 0;
    for (auto& f : fusers) {
      const FuserProperties props = f->properties(view);
      if (props.ready && props.score > best_score) {  // strict: ties keep the earlier fuser
        best = f.get();
        best_score = props.score;
      }
    }
    size_t len = best ? best->finish(view) : 0;
    if (explain) {
      log_line("explore @" + std::to_string(p) + ": " +
               (len < 2 ? "no fuser wins: " + record_name(records[p]) + " runs alone"
                        : best->name() + " wins records [" + std::to_string(p) + ", " + std::to_string(p + len) +
                              ") with score " + std::to_string(int64_t(best_score))));
    }
    if (len < 2) {
      groups.push_back({p, p + 1, false, "unfused"});
      ++p;
      continue;
    }
    groups.push_back({p, p + len, true, best->name()});
    p += len;
  }
  return groups;
}

}  // namespace fusebox::lazy
