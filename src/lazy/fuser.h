// Fusers: the competing strategies that decide which pending records run together. The lazy
// layer has no fusion rules of its own: a fuser only chooses a group of consecutive records,
// and the group becomes one ir::Graph segment compiled by Session::compile with fusion on.
//
//   explore(records):  at position p, reset every fuser and feed it records p, p+1, ... until
//                      every fuser has closed; each remembers its best ready prefix and score.
//                      The highest score > 0 wins (ties: the earlier registered fuser); its
//                      prefix is one optimization. No winner: record p runs alone (UnfusedOp).
//
// Groups are runs of consecutive records of the scheduled order (schedule.h: recorded order with
// consumers pulled next to their producers), a topological order, so read-after-write and
// free-after-read hazards cannot arise between groups. Dropped handles are not records (they
// shape the relative form only), so fusers see op records alone.
// A custom op without a body is a fusion boundary: no fuser is offered it, so it runs alone.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lazy/state.h"

namespace fusebox::lazy {

enum class FuserStatus { Open, Closed };

struct FuserProperties {
  double score = 0;  // estimated saving; 0 never wins
  bool ready = false;  // the records accepted so far form a runnable optimization
};

// What a fuser sees of the segment beyond one record.
struct SegmentView {
  const std::vector<Record>* records = nullptr;
  // Whether `s`, produced in records [begin, end), is needed outside them: a live handle at the
  // flush, or a reader at or after `end`.
  std::function<bool(const TensorState* s, size_t begin, size_t end)> escapes;
};

class Fuser {
 public:
  virtual ~Fuser() = default;
  virtual std::string name() const = 0;
  // Offers the next record (index into the segment); false closes the fuser.
  virtual bool fuse(size_t index, const Record& r) = 0;
  virtual FuserStatus status() const = 0;
  // Properties of the best prefix accepted so far.
  virtual FuserProperties properties(const SegmentView& view) const = 0;
  // How many records from the start the best prefix holds (the optimization: that group).
  virtual size_t finish(const SegmentView& view) = 0;
  virtual void reset(size_t begin) = 0;
  // Why the fuser closed (FUSEBOX_LOG=medium shows it).
  virtual std::string why_closed() const { return "it took no further record"; }
};

using FuserFactory = std::function<std::unique_ptr<Fuser>()>;

// Registers a fuser for every stream created afterwards and every later exploration.
void register_fuser(FuserFactory factory);
// The built-in fusers (element-wise, epilogue, reduction, pre-processing) then registered ones.
std::vector<std::unique_ptr<Fuser>> make_fusers();

// The cost model: bytes of memory traffic saved + launches saved x the launch cost in bytes.
struct CostModel {
  double launch_cost_bytes = 16384;  // one launch costs about as much as moving 16 KiB
};
// Bytes saved by keeping the tensors produced in records [begin, end) that nobody reads outside
// the group in registers (a write and a read each), plus (records - kernels) launches.
double fusion_score(const SegmentView& view, size_t begin, size_t end, size_t kernels, const CostModel& cost = {});

struct Group {
  size_t begin = 0, end = 0;  // records [begin, end)
  bool fused = false;
  std::string fuser;          // "unfused" when no fuser won
};

std::vector<Group> explore(const SegmentView& view, std::vector<std::unique_ptr<Fuser>>& fusers);

}  // namespace fusebox::lazy
