#include "load_program.h"

#include "ir/parser.h"
#include "runtime/file_io.h"
#ifdef FUSEBOX_HAVE_ONNX
#include "onnx/importer.h"
#endif

namespace fusebox::cli {

namespace {
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

#ifdef FUSEBOX_HAVE_ONNX
// Imports again with each shape-fixing input's given value until the import needs none.
Expected<Graph> import_with_values(const std::string& path, const NamedArrays& given, std::set<std::string>* specialised) {
  OnnxInputValues values;
  for (;;) {
    std::string needs;
    Expected<Graph> g = import_onnx_file(path, values, &needs);
    if (g || needs.empty() || values.count(needs)) return g;
    auto it = given.find(onnx_value_name(needs));
    if (it == given.end()) {
      return g.status().with_context("graph input '" + needs + "' fixes shapes: give its value with --input " +
                                     onnx_value_name(needs) + "=FILE.npy");
    }
    values.emplace(needs, it->second);
    if (specialised) specialised->insert(it->first);
  }
}
#endif

Expected<Module> load_program(const std::string& path, const NamedArrays& given, std::set<std::string>* specialised) {
  if (ends_with(path, ".onnx")) {
#ifdef FUSEBOX_HAVE_ONNX
    FUSEBOX_ASSIGN_OR_RETURN(Graph g, import_with_values(path, given, specialised));
    Module m;
    m.functions.push_back(std::move(g));
    return m;
#else
    (void)given;
    (void)specialised;
    return Status::unimplemented(path + ": this build has no ONNX import (install libonnx-dev and protobuf, "
                                 "then reconfigure)");
#endif
  }
  FUSEBOX_ASSIGN_OR_RETURN(std::string text, read_file(path, kMaxTextBytes, /*text=*/true));
  return parse_module(text, path);
}

Expected<Graph> pick_function(const Module& m, const std::string& func) {
  if (m.functions.empty()) return Status::invalid("the program defines no function");
  if (func.empty()) return m.functions.front();
  if (const Graph* g = m.find(func)) return *g;
  std::string names;
  for (const Graph& g : m.functions) names += (names.empty() ? "@" : ", @") + g.name();
  return Status::not_found("no function @" + func + " (functions: " + names + ")");
}

}  // namespace fusebox::cli
