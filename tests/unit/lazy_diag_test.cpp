// Tracing and logging of the lazy layer: a Chrome/Perfetto trace with record, explore, compile
// and execute spans and a bounded event count; FUSEBOX_LOG levels basic, medium and full read
// from stderr.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "lazy/log.h"
#include "lazy/trace.h"
#include "support/lazy_test_util.h"

namespace fusebox::testing {
namespace {

Tensor rnd(std::vector<int64_t> shape, uint64_t seed) { return Tensor::randn(std::move(shape), seed); }

// Registers the op, replacing one of the same name left by an earlier run of the test
// (--gtest_repeat).
Status fresh_op(lazy::CustomOpDef def) {
  lazy::unregister_custom_op(def.name);
  return lazy::register_custom_op(std::move(def));
}

std::string temp_path(const std::string& stem) {
  return ::testing::TempDir() + stem + "_" + std::to_string(::getpid()) + ".json";
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The trace's events: one object per line between "[" and "]"; each complete event has the
// fields a trace viewer needs.
std::vector<std::string> trace_events(const std::string& text) {
  std::vector<std::string> events;
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "[");
  bool closed = false;
  while (std::getline(in, line)) {
    if (line == "]") {
      closed = true;
      continue;
    }
    EXPECT_FALSE(closed) << "text after the closing bracket: " << line;
    if (!line.empty() && line.back() == ',') line.pop_back();
    EXPECT_EQ(line.front(), '{') << line;
    EXPECT_EQ(line.back(), '}') << line;
    if (line.find("\"ph\":\"X\"") == std::string::npos) continue;  // metadata
    for (const char* field : {"\"name\":", "\"ts\":", "\"dur\":", "\"pid\":", "\"tid\":"}) {
      EXPECT_NE(line.find(field), std::string::npos) << field << " missing in " << line;
    }
    events.push_back(line);
  }
  EXPECT_TRUE(closed);
  return events;
}

TEST_F(LazyTest, TraceHasRecordExploreCompileExecuteSpans) {
  const std::string path = temp_path("fusebox_trace");
  lazy::start_trace(path);
  Tensor a = rnd({32, 16}, 21), b = rnd({32, 16}, 22);
  Array got = read(((a * b + 1.0).relu()).sum({1}));
  EXPECT_EQ(got.numel(), 32);
  ASSERT_TRUE(lazy::write_trace().is_ok());
  lazy::stop_trace();
  const std::vector<std::string> events = trace_events(slurp(path));
  for (const char* name : {"record", "explore", "compile", "execute"}) {
    size_t n = 0;
    for (const std::string& e : events) n += e.find(std::string("\"name\":\"") + name + "\"") != std::string::npos;
    EXPECT_GT(n, 0u) << "no " << name << " span";
  }
  size_t records = 0;
  for (const std::string& e : events) records += e.find("\"name\":\"record\"") != std::string::npos;
  EXPECT_EQ(records, 4u);  // mul, add, relu, reduce_sum
  // Off again: nothing more is kept.
  const size_t kept = lazy::trace_info().events;
  Array again = read(a * b);
  EXPECT_EQ(lazy::trace_info().events, kept);
  std::remove(path.c_str());
}

TEST_F(LazyTest, TraceKeepsAtMostMaxEvents) {
  const std::string path = temp_path("fusebox_trace_cap");
  lazy::start_trace(path, 6);
  Tensor x = rnd({64}, 23);
  for (int i = 0; i < 20; ++i) x = (x * 0.5).tanh();
  Array got = read(x);
  const lazy::TraceInfo info = lazy::trace_info();
  EXPECT_EQ(info.events, 6u);
  EXPECT_GT(info.dropped, 30u);
  ASSERT_TRUE(lazy::write_trace().is_ok());
  lazy::stop_trace();
  const std::string text = slurp(path);
  EXPECT_EQ(trace_events(text).size(), 6u);
  EXPECT_NE(text.find("\"dropped_spans\":" + std::to_string(info.dropped)), std::string::npos);
  std::remove(path.c_str());
}

TEST_F(LazyTest, TraceToAnUnwritablePathIsAnError) {
  lazy::start_trace("/nonexistent-dir/for/sure/trace.json");
  lazy::stop_trace();
  Status s = lazy::write_trace();
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("nonexistent-dir"), std::string::npos) << s.to_string();
}

// Runs `program` with the log level set and returns what went to stderr.
template <typename F>
std::string logged(lazy::LogLevel level, F&& program) {
  lazy::set_log_level(level);
  ::testing::internal::CaptureStderr();
  program();
  std::string out = ::testing::internal::GetCapturedStderr();
  lazy::set_log_level(lazy::LogLevel::Off);
  return out;
}

TEST_F(LazyTest, LogBasicIsOneLinePerBlock) {
  Tensor a = rnd({64}, 24), b = rnd({64}, 25);
  auto program = [&] { EXPECT_EQ(read((a * b + 1.0).relu()).numel(), 64); };
  const std::string first = logged(lazy::LogLevel::Basic, program);
  EXPECT_EQ(count(first, "[fusebox lazy] "), 1u) << first;
  EXPECT_NE(first.find("block cpu: 3 record(s) [mul add relu] fused by elementwise, 1 kernel(s)"), std::string::npos)
      << first;
  EXPECT_NE(first.find("plan cache miss"), std::string::npos) << first;
  const std::string second = logged(lazy::LogLevel::Basic, program);
  EXPECT_NE(second.find("plan cache hit"), std::string::npos) << second;
  EXPECT_EQ(second.find("explore"), std::string::npos) << second;
  EXPECT_EQ(logged(lazy::LogLevel::Off, program), "");
}

TEST_F(LazyTest, LogMediumSaysWhyEachFuserClosed) {
  Tensor a = rnd({8, 64}, 26);
  const std::string out = logged(lazy::LogLevel::Medium, [&] {
    Tensor m = matmul(a, a.transpose({1, 0}));
    EXPECT_EQ(read((m * 2.0).sum({1})).numel(), 8);
  });
  EXPECT_NE(out.find("elementwise closed at record 0: does not take transpose (injective)"), std::string::npos) << out;
  EXPECT_NE(out.find("reduction closed at record"), std::string::npos) << out;
  EXPECT_NE(out.find(" wins records ["), std::string::npos) << out;
  EXPECT_NE(out.find("block cpu:"), std::string::npos) << out;
  EXPECT_EQ(out.find("record cpu:"), std::string::npos) << out;  // records only at full
}

TEST_F(LazyTest, LogMediumNamesCustomBoundary) {
  lazy::CustomOpDef def;
  def.name = "test_log_boundary";
  def.infer = lazy::same_as_input(0);
  def.cpu = [](const std::vector<Array>& in, const Attrs&, std::vector<Array>& out) {
    for (int64_t i = 0; i < in[0].numel(); ++i) out[0].set_f64(i, -in[0].get_f64(i));
    return Status::ok();
  };
  ASSERT_TRUE(fresh_op(def).is_ok());
  Tensor a = rnd({16}, 27);
  const std::string out = logged(lazy::LogLevel::Medium, [&] {
    EXPECT_EQ(read(custom_op("test_log_boundary", {a * 2.0}).exp()).numel(), 16);
  });
  EXPECT_NE(out.find("test_log_boundary is a custom op without a body (a fusion boundary)"), std::string::npos) << out;
  EXPECT_NE(out.find("[test_log_boundary] unfused, 1 kernel(s) [test_log_boundary]"), std::string::npos) << out;
}

TEST_F(LazyTest, LogFullAddsEveryRecord) {
  Tensor a = rnd({4, 5}, 28), b = rnd({4, 5}, 29);
  const std::string out = logged(lazy::LogLevel::Full, [&] { EXPECT_EQ(read(a * b).numel(), 20); });
  EXPECT_NE(out.find("record cpu: mul(t" + std::to_string(a.id()) + ", t" + std::to_string(b.id()) + ") -> t"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find(" f32[4,5]"), std::string::npos) << out;
  EXPECT_NE(out.find("block cpu: 1 record(s) [mul] unfused"), std::string::npos) << out;
}

TEST(LazyLog, LevelNames) {
  EXPECT_EQ(*lazy::parse_log_level("basic"), lazy::LogLevel::Basic);
  EXPECT_EQ(*lazy::parse_log_level("medium"), lazy::LogLevel::Medium);
  EXPECT_EQ(*lazy::parse_log_level("full"), lazy::LogLevel::Full);
  EXPECT_EQ(*lazy::parse_log_level(""), lazy::LogLevel::Off);
  Expected<lazy::LogLevel> bad = lazy::parse_log_level("loud");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.status().message().find("loud"), std::string::npos);
}

}  // namespace
}  // namespace fusebox::testing
