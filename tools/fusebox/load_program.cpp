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

Expected<Module> load_program(const std::string& path) {
  if (ends_with(path, ".onnx")) {
#ifdef FUSEBOX_HAVE_ONNX
    FUSEBOX_ASSIGN_OR_RETURN(Graph g, import_onnx_file(path));
    Module m;
    m.functions.push_back(std::move(g));
    return m;
#else
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
