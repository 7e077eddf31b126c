#include "fusion/pipeline.h"

#include "ir/verifier.h"

namespace fusebox {

namespace {
constexpr PassInfo kPasses[] = {
#define FUSEBOX_PASS(name, fn, help) {name, &fn, help},
#include "fusion/passes.def"
#undef FUSEBOX_PASS
};
}  // namespace

std::span<const PassInfo> all_passes() { return kPasses; }

const PassInfo* find_pass(std::string_view name) {
  for (const PassInfo& p : kPasses)
    if (p.name == name) return &p;
  return nullptr;
}

Status run_pipeline(Graph& g, const std::vector<std::string>& passes, PassContext& ctx,
                    const PipelineHooks& hooks) {
  for (const std::string& entry : passes) {
    // "name{option}": the only option today is canonicalize{no-recognition} (skip_fusion).
    size_t brace = entry.find('{');
    std::string name = entry.substr(0, brace);
    std::string option = brace == std::string::npos ? "" : entry.substr(brace + 1, entry.size() - brace - 2);
    if (!option.empty() && option != "no-recognition") {
      return Status::invalid("unknown pass option '" + option + "' in '" + entry + "'");
    }
    const PassInfo* pass = find_pass(name);
    if (!pass) {
      if (hooks.skip_unavailable) {
        ctx.count("pipeline.skipped", name);
        continue;
      }
      std::string known;
      for (const PassInfo& p : kPasses) known += (known.empty() ? "" : ", ") + std::string(p.name);
      return Status::invalid("unknown pass '" + name + "' (passes: " + known + ")");
    }
    bool recognize = ctx.recognize_patterns;
    if (option == "no-recognition") ctx.recognize_patterns = false;
    Status s = pass->run(g, ctx);
    ctx.recognize_patterns = recognize;
    if (!s.is_ok()) return s.with_context("pass " + name);
    if (hooks.verify_each) {
      Status v = verify(g);
      if (!v.is_ok()) return Status::internal("graph does not verify after pass " + name + ": " + v.message());
    }
    if (hooks.after_pass) hooks.after_pass(name, g);
  }
  return Status::ok();
}

Expected<std::vector<std::string>> parse_pass_list(std::string_view text) {
  std::vector<std::string> out;
  if (text.empty()) return out;
  const std::string whole(text);
  while (true) {
    size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    if (item.empty()) {
      return Status::invalid("empty pass name at position " + std::to_string(out.size() + 1) + " of the pass list '" +
                             whole + "'");
    }
    out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    text = text.substr(comma + 1);
  }
  return out;
}

}  // namespace fusebox
