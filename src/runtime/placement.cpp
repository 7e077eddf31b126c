#include "runtime/placement.h"

namespace fusebox {

namespace {

class Placer {
 public:
  Placer(const Graph& g, Placement& p, const BackendMaker& fallback, bool device_io)
      : g_(g), p_(p), fallback_(fallback), io_(device_io ? 0 : -1) {}

  Status run() {
    if (!p_.backends[0]->device().is_host()) {
      FUSEBOX_ASSIGN_OR_RETURN(p_.host, cpu());
    }
    const size_t num_values = g_.num_values();
    p_.resident_value.resize(num_values);
    p_.resident_backend.assign(num_values, p_.host);
    residents_.resize(num_values);
    for (size_t v = 0; v < num_values; ++v) p_.resident_value[v] = ValueId(v);
    if (io_ < 0) io_ = p_.host;
    for (ValueId v : g_.inputs()) {
      residents_[size_t(v)].push_back(int(v));
      p_.resident_backend[size_t(v)] = io_;
    }
    const auto& nodes = g_.nodes();
    p_.node_backend.resize(nodes.size());
    p_.operands.resize(nodes.size());
    p_.copies_before.resize(nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i) {
      const Node& n = nodes[i];
      int b = p_.host;
      if (n.op != Op::Constant) {
        if (p_.backends[0]->claims(g_, n)) {
          b = 0;
        } else {
          FUSEBOX_ASSIGN_OR_RETURN(b, cpu());
        }
      }
      p_.node_backend[i] = b;
      for (ValueId v : n.inputs) p_.operands[i].push_back(resident_on(v, b, p_.copies_before[i]));
      for (ValueId v : n.outputs) {
        p_.resident_backend[size_t(v)] = b;
        residents_[size_t(v)].push_back(int(v));
      }
    }
    for (ValueId v : g_.outputs()) p_.output_resident.push_back(resident_on(v, io_, p_.final_copies));
    return Status::ok();
  }

 private:
  Device device(int b) const { return p_.backends[size_t(b)]->device(); }

  // The index of the CPU backend, made on first need.
  Expected<int> cpu() {
    if (cpu_ >= 0) return cpu_;
    FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<Backend> b, fallback_());
    if (!b->device().is_host()) return Status::internal("the fallback backend " + std::string(b->name()) + " is not on the host");
    p_.backends.push_back(std::move(b));
    cpu_ = int(p_.backends.size()) - 1;
    return cpu_;
  }

  // A resident of `v` on backend b's device, adding copies when there is none yet.
  int resident_on(ValueId v, int b, std::vector<Copy>& copies) {
    const Device want = device(b);
    std::vector<int>& have = residents_[size_t(v)];
    for (int r : have) {
      if (device(p_.resident_backend[size_t(r)]) == want) return r;
    }
    const int source = have.front();
    if (want.is_host()) return add_copy(v, source, b, p_.resident_backend[size_t(source)], true, copies);
    const int host = resident_on(v, p_.host, copies);
    return add_copy(v, host, b, b, false, copies);
  }

  int add_copy(ValueId v, int from, int owner, int copier, bool to_host, std::vector<Copy>& copies) {
    const int r = int(p_.resident_value.size());
    p_.resident_value.push_back(v);
    p_.resident_backend.push_back(owner);
    residents_[size_t(v)].push_back(r);
    copies.push_back(Copy{from, r, copier, to_host});
    return r;
  }

  const Graph& g_;
  Placement& p_;
  const BackendMaker& fallback_;
  int cpu_ = -1;
  int io_;  // the backend whose device holds graph inputs and outputs
  std::vector<std::vector<int>> residents_;  // per value: its residents, the defining one first
};

}  // namespace

size_t Placement::num_copies() const {
  size_t n = final_copies.size();
  for (const auto& c : copies_before) n += c.size();
  return n;
}

std::string Placement::summary() const {
  std::vector<size_t> count(backends.size(), 0);
  for (int b : node_backend) ++count[size_t(b)];
  std::string s;
  for (size_t b = 0; b < backends.size(); ++b) {
    if (!count[b] && b) continue;
    s += (s.empty() ? "" : ", ") + std::string(backends[b]->name()) + " " + std::to_string(count[b]) +
         (count[b] == 1 ? " node" : " nodes");
  }
  if (size_t copies = num_copies()) s += ", " + std::to_string(copies) + (copies == 1 ? " copy" : " copies");
  return s;
}

Expected<Placement> place(const Graph& g, std::shared_ptr<Backend> target, const BackendMaker& fallback, bool device_io) {
  Placement p;
  p.backends.push_back(std::move(target));
  Placer placer(g, p, fallback, device_io);
  FUSEBOX_RETURN_IF_ERROR(placer.run());
  return p;
}

}  // namespace fusebox
