// The relative form of a segment (segment.h explains it): the plan-cache key as a token list,
// the renumbering of its tensors and its dim ids, and what the fusers and graph builder ask of
// it (is a tensor still needed after a group, what is a size's dim id).
//
// It is built record by record as the stream records them (spec §5, "lookup is incremental"):
// the tokens and their hash grow with each record and each drop, so a flush adds only what it
// alone knows (which tensors still have a handle, what triggered it) before the plan lookup.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "lazy/state.h"

namespace fusebox::lazy {

// State -> relative index, by open addressing on the pointer: every operand of every record is
// looked up at each flush, and a node-based map allocated a node per tensor (a flush of 100
// one-op records spent a twentieth of its time building it).
class StateIndex {
 public:
  void reserve(size_t n);
  int find(const TensorState* s) const;  // -1: not in the segment
  void insert(const TensorState* s, int r);  // s must not be in the index

 private:
  size_t slot_of(const TensorState* s) const;
  std::vector<std::pair<const TensorState*, int>> slots_;  // a power of two, at most half full
  size_t size_ = 0;
};

struct RelativeForm {
  std::vector<uint64_t> tokens;
  uint64_t hash = 0;
  std::vector<TensorState*> tensors;          // relative index -> state
  StateIndex index;
  std::vector<int64_t> dim_sizes;             // dim id -> size (sizes other than 1)
  std::unordered_map<int64_t, int> dim_ids;   // size -> dim id
  std::vector<bool> alive;                    // per tensor: a live handle at the flush
  std::vector<int> producer;                  // per tensor: op record producing it, -1 outside
  std::vector<int> last_reader;               // per tensor: last op record reading it, -1 none

  int rel(const TensorState* s) const;
  // Dim id of a size, -1 when the size is 1 or not a dim of the segment.
  int dim_id(int64_t size) const;
  // Needed outside op records [begin, end): alive, or read at or after `end`.
  bool escapes(const TensorState* s, size_t begin, size_t end) const;
};

// A stream's relative form in the making. `add` and `drop` run on the recording path (under the
// stream's record lock); `finish` at the flush, under the same lock, so the handle counts it reads
// cannot change meanwhile.
class RelativeFormBuilder {
 public:
  explicit RelativeFormBuilder(bool fusion);
  // The op record at position `op_index` of the segment.
  void add(const Record& r, int op_index);
  // The last handle of `s` died (a tensor of another segment changes nothing).
  void drop(const TensorState* s);
  // The finished form (alive bits, the trigger, the hash); the builder starts the next segment,
  // with room for one as large.
  RelativeForm finish(uint8_t trigger);

 private:
  void token(uint64_t t);
  int dim(int64_t size);
  void shape(const TensorState& s);
  int tensor(TensorState* s, bool produced, int op_index);
  void attr(const AttrValue& v);
  void restart();

  const bool fusion_;
  RelativeForm rf_;
  // The hash in four independent lanes (token i goes to lane i % 4): one chain of mixes was a
  // serial multiply-shift chain of ~10 cycles per token (the tokens are compared exactly on a
  // hit anyway).
  uint64_t lane_[4];
};

}  // namespace fusebox::lazy
