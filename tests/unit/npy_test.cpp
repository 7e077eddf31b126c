// Tests of the .npy reader and writer: round trips of every dtype, numpy's exact layout, the
// header variants numpy and others write, every kind of malformed file, and a fuzz loop over
// mutations of valid files (nothing may crash; errors name the file).
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "runtime/npy.h"
#include "support/test_util.h"

namespace fusebox {
namespace {

using testing::random_array;

std::string prelude_v1(std::string_view header) {
  std::string s("\x93NUMPY\x01\x00", 8);
  s += char(header.size() & 0xff);
  s += char(header.size() >> 8);
  return s + std::string(header);
}

std::string prelude_v2(int major, std::string_view header) {
  std::string s("\x93NUMPY", 6);
  s += char(major);
  s += char(0);
  for (int i = 0; i < 4; ++i) s += char((header.size() >> (8 * i)) & 0xff);
  return s + std::string(header);
}

std::string f32_bytes(std::vector<float> v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

// The error message of parsing `bytes`, or "ok".
std::string parse_error(std::string_view bytes) {
  Expected<Array> a = parse_npy(bytes, "t.npy");
  return a ? "ok" : a.status().message();
}

TEST(Npy, RoundTripsEveryDtype) {
  const std::vector<std::vector<int64_t>> shapes = {{}, {5}, {2, 3, 4}, {0, 3}, {1, 1, 7}};
  uint64_t seed = 1;
  for (int t = 0; t < kNumDTypes; ++t) {
    DType dtype = static_cast<DType>(t);
    if (dtype == DType::BF16) continue;
    for (const auto& shape : shapes) {
      Array a = random_array(dtype, shape, seed++, -100, 100);
      Expected<std::string> bytes = format_npy(a);
      ASSERT_TRUE(bytes) << bytes.status().to_string();
      EXPECT_EQ((bytes->size() - a.nbytes()) % 64, 0u) << "data must start 64-byte aligned";
      Expected<Array> back = parse_npy(*bytes, "x.npy");
      ASSERT_TRUE(back) << back.status().to_string();
      EXPECT_TRUE(back->same_data(a)) << a.type_string() << " came back as " << back->type_string();
    }
  }
}

TEST(Npy, WritesNumpysExactLayout) {
  // np.save of np.arange(6, dtype='<f4').reshape(2, 3): a 118-byte header making 128 in all.
  Array a = testing::array_f32({2, 3}, {0, 1, 2, 3, 4, 5});
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  header += std::string(118 - 1 - header.size(), ' ') + "\n";
  std::string expected = prelude_v1(header) + f32_bytes({0, 1, 2, 3, 4, 5});
  Expected<std::string> bytes = format_npy(a);
  ASSERT_TRUE(bytes);
  EXPECT_EQ(*bytes, expected);

  // One-dim tuples keep their comma, scalars are (), one-byte types use '|'.
  Expected<std::string> vec = format_npy(Array(DType::U8, {3}));
  ASSERT_TRUE(vec);
  EXPECT_NE(vec->find("{'descr': '|u1', 'fortran_order': False, 'shape': (3,), }"), std::string::npos);
  Expected<std::string> scalar = format_npy(Array(DType::I64, {}));
  ASSERT_TRUE(scalar);
  EXPECT_NE(scalar->find("'descr': '<i8', 'fortran_order': False, 'shape': (), }"), std::string::npos);
}

TEST(Npy, ReadsHeaderVariants) {
  const std::string data = f32_bytes({1.5f, -2.0f});
  const std::vector<std::string> headers = {
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n",
      "{'shape': (2,), 'fortran_order': False, 'descr': '<f4'}",        // any key order, no comma
      "{\"descr\":\"<f4\",\"fortran_order\":False,\"shape\":(2,)}   \n",  // double quotes, no spaces
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2L,), }\n",    // Python 2 long
      "  { 'descr' : '<f4' ,\n 'fortran_order' : False , 'shape' : ( 2 , ) , }  \n",
  };
  for (const std::string& h : headers) {
    for (const std::string& file : {prelude_v1(h), prelude_v2(2, h), prelude_v2(3, h)}) {
      Expected<Array> a = parse_npy(file + data + "trailing bytes are ignored", "t.npy");
      ASSERT_TRUE(a) << h << ": " << a.status().to_string();
      EXPECT_EQ(a->type_string(), "f32[2]");
      EXPECT_EQ(a->data<float>()[0], 1.5f);
      EXPECT_EQ(a->data<float>()[1], -2.0f);
    }
  }
  // Byte order does not matter for one-byte types.
  for (const char* d : {"|u1", "<u1", ">u1"}) {
    std::string h = std::string("{'descr': '") + d + "', 'fortran_order': False, 'shape': (3,), }";
    Expected<Array> a = parse_npy(prelude_v1(h) + "\x01\x02\xff", "t.npy");
    ASSERT_TRUE(a) << d << ": " << a.status().to_string();
    EXPECT_EQ(a->get_i64(2), 255);
  }
  // Bool bytes other than 0/1 read as true, as numpy does.
  Expected<Array> b = parse_npy(prelude_v1("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }") +
                                    std::string("\x00\x01\x07", 3),
                                "t.npy");
  ASSERT_TRUE(b);
  EXPECT_EQ(testing::to_doubles(*b), (std::vector<double>{0, 1, 1}));
}

TEST(Npy, RefusesBf16WhenWriting) {
  Expected<std::string> bytes = format_npy(Array(DType::BF16, {2}));
  ASSERT_FALSE(bytes);
  EXPECT_NE(bytes.status().message().find("bf16 has no numpy dtype"), std::string::npos);
  Status s = write_npy(::testing::TempDir() + "/bf16.npy", Array(DType::BF16, {2}));
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("cast it to f32"), std::string::npos);
}

TEST(Npy, MalformedFilesGiveClearErrors) {
  auto file = [](std::string header, std::string data = "") { return prelude_v1(header) + data; };
  const std::string ok_tail = "'fortran_order': False, 'shape': (2,), }";
  struct Case {
    std::string bytes;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"", "does not start with the magic bytes"},
      {"PK\x03\x04 this is a zip", "does not start with the magic bytes"},
      {std::string("\x93NUMPY\x01", 7), "ends inside the version"},
      {std::string("\x93NUMPY\x04\x00\x10\x00", 10), "unsupported .npy version 4.0"},
      {std::string("\x93NUMPY\x02\x00\x10\x00", 10), "ends inside the header length"},
      {std::string("\x93NUMPY\x01\x00\x76\x00{'descr'", 17), "the header says 118 bytes but the file has 7"},
      {file(""), "header is not a dict"},
      {file("[1, 2, 3]"), "header is not a dict"},
      {file("{'descr': '<f4', 'shape': (2,), }"), "no 'fortran_order' entry"},
      {file("{'descr': '<f4', 'fortran_order': False}"), "no 'shape' entry"},
      {file("{" + ok_tail), "no 'descr' entry"},
      {file("{'descr': '<f4', 'descr': '<f4', " + ok_tail), "'descr' appears twice"},
      {file("{'descr': '<f4', 'extra': 1, " + ok_tail), "unexpected key 'extra'"},
      {file("{'descr': '<c8', " + ok_tail), "unsupported dtype '<c8'"},
      {file("{'descr': '<U10', " + ok_tail), "unsupported dtype '<U10'"},
      {file("{'descr': [('a', '<f4')], " + ok_tail), "structured dtypes"},
      {file("{'descr': 4, " + ok_tail), "'descr' must be a string"},
      {file("{'descr': '>f4', " + ok_tail), "big-endian data ('>f4') is not supported"},
      {file("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", f32_bytes({1, 2})), "fortran_order True"},
      {file("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,), }"), "must be True or False"},
      {file("{'descr': '<f4', 'fortran_order': False, 'shape': [2], }"), "'shape' must be a tuple"},
      {file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }"), "'shape' must hold integers"},
      {file("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }"), "negative dim -2"},
      {file("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }"), "does not fit in 64 bits"},
      {file("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }"), "too many elements"},
      {file("{'descr': '<i8', 'fortran_order': False, 'shape': (2305843009213693952,), }"), "too many elements"},
      {file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", f32_bytes({1, 2, 3})),
       "shape (2, 3) of '<f4' needs 24 bytes but the file has 12"},
      {file("{'descr': '<f4', 'fortran_order': False, 'shape': (2,) }junk"), "unexpected text after the header dict"},
      {file("{'descr': '<f4' 'fortran_order': False, 'shape': (2,) }"), "expected ',' or '}'"},
      {file("{'descr: '<f4', " + ok_tail), "expected ':'"},
  };
  for (const Case& c : cases) {
    std::string message = parse_error(c.bytes);
    EXPECT_NE(message.find(c.message), std::string::npos) << "want '" << c.message << "', got: " << message;
    EXPECT_EQ(message.rfind("t.npy: ", 0), 0u) << "errors name the file: " << message;
  }
}

TEST(Npy, FilesOnDisk) {
  const std::string dir = ::testing::TempDir() + "/npy_test_files";
  std::filesystem::create_directories(dir);
  Array a = random_array(DType::I32, {3, 4}, 7, -1000, 1000);
  ASSERT_TRUE(write_npy(dir + "/a.npy", a).is_ok());
  EXPECT_FALSE(std::filesystem::exists(dir + "/a.npy.tmp"));
  Expected<Array> back = read_npy(dir + "/a.npy");
  ASSERT_TRUE(back) << back.status().to_string();
  EXPECT_TRUE(back->same_data(a));

  Expected<Array> missing = read_npy(dir + "/missing.npy");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("missing.npy"), std::string::npos);
  EXPECT_FALSE(read_npy(dir));  // a directory
  Status s = write_npy(dir + "/no/such/dir/a.npy", a);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("cannot write"), std::string::npos);
}

// Mutations of valid files: flipped bytes, truncations, insertions and deletions, header bytes
// replaced with the characters the header grammar cares about. Every result is either an error
// naming the file or an array whose data came from the file.
TEST(Npy, FuzzedFilesNeverCrash) {
  std::vector<std::string> seeds;
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::U8, DType::I8, DType::I32, DType::I64, DType::Bool}) {
    seeds.push_back(*format_npy(random_array(t, {2, 3}, 3)));
    seeds.push_back(*format_npy(random_array(t, {5}, 4)));
  }
  seeds.push_back(prelude_v2(2, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2), }") + f32_bytes({1, 2}));
  seeds.push_back(prelude_v2(3, "{'descr': '|u1', 'fortran_order': False, 'shape': (), }") + "x");
  const std::string grammar = "{}()[],:'\" -0123456789LTFx<>|fiub\n\x93";
  std::mt19937_64 rng(12345);
  int parsed = 0, refused = 0;
  for (int iter = 0; iter < 30000; ++iter) {
    std::string f = seeds[rng() % seeds.size()];
    const int edits = 1 + int(rng() % 4);
    for (int e = 0; e < edits && !f.empty(); ++e) {
      // Most edits land in the first 128 bytes, where the prelude and header are.
      size_t at = (rng() % 4 ? rng() % std::min<size_t>(f.size(), 128) : rng() % f.size());
      switch (rng() % 6) {
        case 0: f[at] = char(rng()); break;
        case 1: f[at] = grammar[rng() % grammar.size()]; break;
        case 2: f.resize(at); break;
        case 3: f.insert(at, 1, grammar[rng() % grammar.size()]); break;
        case 4: f.erase(at, 1 + rng() % 8); break;
        case 5: f.insert(at, f.substr(at, rng() % 16)); break;
      }
    }
    Expected<Array> a = parse_npy(f, "fuzz.npy");
    if (a) {
      ++parsed;
      ASSERT_LE(a->nbytes(), f.size());
    } else {
      ++refused;
      ASSERT_EQ(a.status().message().rfind("fuzz.npy: ", 0), 0u) << a.status().message();
    }
  }
  // Both outcomes must be exercised, or the mutations are not reaching the parser's branches.
  EXPECT_GT(parsed, 1000);
  EXPECT_GT(refused, 1000);
}

}  // namespace
}  // namespace fusebox
