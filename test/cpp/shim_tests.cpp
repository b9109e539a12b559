// Catch2 tests of the shim's C ABI, tagged by the C function they cover.
// Records are sent to a file (set_option "output") and read back.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include "aoti_debug_printer.h"
#include "aoti_debug_printer_kernel.h"
#include "format.h"
#include "graphs.h"
#include "guard.h"
#include "output.h"
#include "record.h"
#include "save.h"
#include "saver.h"
#include "shim.h"
#include "trap.h"

#include <ATen/ATen.h>
#include <ATen/cpu/vec/vec.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/inductor/aoti_torch/utils.h>
#include <torch/serialize.h>

#include <dlfcn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

// ATen's headers define a glog-style CHECK (c10/util/logging_is_not_google_glog.h)
// over Catch's, which aborts the whole executable at the first failure and
// reports nothing: Catch's own, as catch.hpp defines it.
#undef CHECK
#define CHECK(...) \
  INTERNAL_CATCH_TEST("CHECK", Catch::ResultDisposition::ContinueOnFailure, __VA_ARGS__)

namespace fs = std::filesystem;

namespace {

AtenTensorHandle handle(at::Tensor& t) {
  return torch::aot_inductor::tensor_pointer_to_tensor_handle(&t);
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A fresh directory, output file and dump directory for each test.
struct Scratch {
  fs::path dir;
  fs::path out;
  fs::path dump;
  Scratch() {
    static int n = 0;
    dir = fs::temp_directory_path() /
          ("adp-catch-" + std::to_string(getpid()) + "-" + std::to_string(n++));
    fs::remove_all(dir);
    fs::create_directories(dir);
    out = dir / "records.txt";
    dump = dir / "dump";
    REQUIRE(aoti_debug_printer_set_option("output", out.c_str()) == 0);
    REQUIRE(aoti_debug_printer_set_option("dump_dir", dump.c_str()) == 0);
    REQUIRE(aoti_debug_printer_set_option("format", "text") == 0);
    REQUIRE(aoti_debug_printer_set_option("max_values", "64") == 0);
  }
  ~Scratch() {
    aoti_debug_printer_set_option("output", "stdout");
    fs::remove_all(dir);
  }
  std::string output() const { return slurp(out); }
  std::vector<fs::path> snapshots() const {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dump)) {
      if (e.path().extension() == ".pt") files.push_back(e.path());
    }
    return files;
  }
};

std::string print_record(at::Tensor t, const char* arg = "x") {
  Scratch s;
  aoti_debug_printer_tensor(AOTI_DEBUG_PRINTER_LEVEL_PRINT, AOTI_DEBUG_PRINTER_BEFORE_LAUNCH, "k",
                            arg, handle(t));
  return s.output();
}

// The value of `key=` in a text record.
std::string field(const std::string& record, const std::string& key) {
  std::smatch m;
  const std::regex re("(^|[\\s\\[])" + std::regex_replace(key, std::regex("\\+"), "\\+") +
                      "=([^\\s]+)");
  REQUIRE(std::regex_search(record, m, re));
  return m[2];
}

// The value of `key=` in the first record in `out` whose header holds `header`.
std::string field_after(const std::string& out, const std::string& header, const std::string& key) {
  const size_t at = out.find(header);
  REQUIRE(at != std::string::npos);
  return field(out.substr(at), key);
}

// A launch event at level 2 whose records end with records_end.
void printing_launch(int32_t phase, const char* kernel, int32_t flags) {
  aoti_debug_printer_launch_at_level(AOTI_DEBUG_PRINTER_LEVEL_PRINT, phase, kernel,
                                     flags | AOTI_DEBUG_PRINTER_RECORDS_END);
}

// A printed record of `x` as generated code gives it: its role, and why it
// holds no node.
void printed(int32_t phase, const char* kernel, const char* arg, at::Tensor& x, int32_t role,
             const char* why = "") {
  aoti_debug_printer_tensor_held(AOTI_DEBUG_PRINTER_LEVEL_PRINT, phase, kernel, arg, "", why, role,
                                 handle(x));
}

}  // namespace

TEST_CASE("every dtype prints its statistics", "[aoti_debug_printer_tensor]") {
  const std::vector<at::ScalarType> dtypes = {at::kBool,
                                              at::kByte,
                                              at::kChar,
                                              at::kShort,
                                              at::kInt,
                                              at::kLong,
                                              at::kHalf,
                                              at::kBFloat16,
                                              at::kFloat,
                                              at::kDouble,
                                              at::kFloat8_e4m3fn,
                                              at::kFloat8_e5m2,
                                              at::kFloat8_e4m3fnuz,
                                              at::kFloat8_e5m2fnuz,
                                              at::kUInt16,
                                              at::kUInt32,
                                              at::kUInt64};
  for (const auto dtype : dtypes) {
    CAPTURE(c10::toString(dtype));
    const at::Tensor t = at::arange(0, 6, at::kDouble).reshape({2, 3}).to(dtype);
    const std::string r = print_record(t);
    CHECK(field(r, "dtype") == std::string(c10::getDtypeNames(dtype).first));
    CHECK(field(r, "numel") == "6");
    CHECK(field(r, "shape") == "[2,");
    if (dtype == at::kBool) {
      CHECK(field(r, "min") == "0");
      CHECK(field(r, "max") == "1");
      CHECK(field(r, "zeros") == "1");
    } else {
      CHECK(field(r, "min") == "0");
      CHECK(field(r, "max") == "5");
      CHECK(field(r, "mean") == "2.5");
      CHECK(std::stod(field(r, "std")) == Approx(1.870829).epsilon(1e-5));
      CHECK(field(r, "zeros") == "1");
    }
    CHECK(r.find("values=[") != std::string::npos);
  }
}

TEST_CASE("int64 and uint64 extremes stay exact", "[aoti_debug_printer_tensor]") {
  const int64_t big = (int64_t{1} << 62) + 1;
  const std::string r = print_record(at::tensor({-big, big}, at::kLong));
  CHECK(field(r, "min") == std::to_string(-big));
  CHECK(field(r, "max") == std::to_string(big));
  const std::string u = print_record(at::full({1}, -1, at::kLong).to(at::kUInt64));
  CHECK(field(u, "max") == "18446744073709551615");
}

TEST_CASE("NaN and infinities are counted, statistics cover finite values",
          "[aoti_debug_printer_tensor]") {
  const double inf = INFINITY, nan = NAN;
  for (const auto dtype : {at::kFloat, at::kHalf, at::kBFloat16, at::kDouble}) {
    CAPTURE(c10::toString(dtype));
    const at::Tensor t = at::tensor({1.0, nan, inf, -inf, -inf, 0.0, 3.0}, at::kDouble).to(dtype);
    const std::string r = print_record(t);
    CHECK(field(r, "nan") == "1");
    CHECK(field(r, "+inf") == "1");
    CHECK(field(r, "-inf") == "2");
    CHECK(field(r, "finite") == "3");
    CHECK(field(r, "zeros") == "1");
    CHECK(field(r, "min") == "0");
    CHECK(field(r, "max") == "3");
    CHECK(field(r, "absmax") == "3");
    CHECK(r.find("values=[1, nan, inf, -inf, -inf, 0, 3]") != std::string::npos);
  }
  const std::string all_nan = print_record(at::full({3}, nan));
  CHECK(all_nan.find("no finite values") != std::string::npos);
}

TEST_CASE("complex statistics are of the modulus", "[aoti_debug_printer_tensor]") {
  const at::Tensor t = at::complex(at::tensor({3.0, 0.0, INFINITY}), at::tensor({4.0, 0.0, 1.0}));
  for (const auto dtype : {at::kComplexFloat, at::kComplexDouble, at::kComplexHalf}) {
    CAPTURE(c10::toString(dtype));
    const std::string r = print_record(t.to(dtype));
    CHECK(r.find("|z| min=0 max=5") != std::string::npos);
    CHECK(field(r, "+inf") == "1");
    CHECK(field(r, "zeros") == "1");
    CHECK(r.find("values=[3+4j, 0+0j, inf+1j]") != std::string::npos);
  }
}

TEST_CASE("layouts: non-contiguous, expanded, empty, 0-dim", "[aoti_debug_printer_tensor]") {
  const at::Tensor base = at::arange(12, at::kFloat).reshape({3, 4});
  SECTION("transposed view") {
    const std::string r = print_record(base.t());
    CHECK(field(r, "contiguous") == "false");
    CHECK(field(r, "stride") == "[1,");
    CHECK(field(r, "mean") == "5.5");
    CHECK(r.find("values=[0, 4, 8, 1,") != std::string::npos);
  }
  SECTION("zero-stride expand") {
    const std::string r = print_record(at::tensor({2.0f}).expand({1000, 1000}));
    CHECK(field(r, "numel") == "1000000");
    CHECK(field(r, "stride") == "[0,");
    CHECK(field(r, "finite") == "1000000");
    CHECK(field(r, "mean") == "2");
    CHECK(field(r, "std") == "0");
  }
  SECTION("empty") {
    const std::string r = print_record(at::empty({0, 3}));
    CHECK(field(r, "numel") == "0");
    CHECK(r.find("no finite values") != std::string::npos);
  }
  SECTION("0-dim") {
    const std::string r = print_record(at::scalar_tensor(-7.5));
    CHECK(field(r, "shape") == "[]");
    CHECK(field(r, "min") == "-7.5");
    CHECK(field(r, "std") == "nan");
  }
  SECTION("large, parallel chunks agree with ATen") {
    const at::Tensor big = at::randn({3, 1 << 20}, at::kFloat).slice(1, 0, -1, 3);
    const std::string r = print_record(big);
    CHECK(std::stod(field(r, "mean")) == Approx(big.mean().item<double>()).margin(1e-6));
    CHECK(std::stod(field(r, "std")) == Approx(big.std().item<double>()).epsilon(1e-5));
    CHECK(std::stod(field(r, "max")) == Approx(big.max().item<double>()));
    CHECK(r.find("values=") == std::string::npos);
  }
}

TEST_CASE("values threshold is configurable", "[aoti_debug_printer_set_option]") {
  Scratch s;
  REQUIRE(aoti_debug_printer_set_option("max_values", "2") == 0);
  at::Tensor t = at::ones({3});
  aoti_debug_printer_tensor(AOTI_DEBUG_PRINTER_LEVEL_PRINT, 0, "k", "x", handle(t));
  CHECK(s.output().find("values=") == std::string::npos);
  CHECK(aoti_debug_printer_set_option("max_values", "-1") != 0);
  CHECK(aoti_debug_printer_set_option("format", "xml") != 0);
  CHECK(aoti_debug_printer_set_option("no_such_key", "1") != 0);
  CHECK(aoti_debug_printer_set_option(nullptr, nullptr) != 0);
}

TEST_CASE("jsonl format", "[aoti_debug_printer_set_option]") {
  Scratch s;
  REQUIRE(aoti_debug_printer_set_option("format", "jsonl") == 0);
  at::Tensor t = at::tensor({1.0f, NAN});
  aoti_debug_printer_tensor(AOTI_DEBUG_PRINTER_LEVEL_PRINT, 1, "k\"q", "x", handle(t));
  const std::string out = s.output();
  CHECK(out.find("\"event\": \"tensor\"") == 1);
  CHECK(out.find("\"kernel\": \"k\\\"q\"") != std::string::npos);
  CHECK(out.find("\"phase\": \"after_launch\"") != std::string::npos);
  CHECK(out.find("\"nan\": 1") != std::string::npos);
  CHECK(out.find("\"values\": [\"1\", \"nan\"]") != std::string::npos);
  CHECK(std::count(out.begin(), out.end(), '\n') == 1);
}

TEST_CASE("null and undefined handles print a clear line", "[aoti_debug_printer_tensor]") {
  Scratch s;
  aoti_debug_printer_tensor(AOTI_DEBUG_PRINTER_LEVEL_PRINT, 0, "k", "x", nullptr);
  at::Tensor undefined;
  aoti_debug_printer_tensor(AOTI_DEBUG_PRINTER_LEVEL_PRINT, 0, "k", "y", handle(undefined));
  aoti_debug_printer_tensor(AOTI_DEBUG_PRINTER_LEVEL_SAVE, 0, nullptr, nullptr, nullptr);
  const std::string out = s.output();
  CHECK(out.find("k x") != std::string::npos);
  CHECK(out.find("null tensor handle") != std::string::npos);
  CHECK(out.find("undefined tensor") != std::string::npos);
}

TEST_CASE("upstream's print signature reaches our printer", "[aoti_torch_print_tensor_handle]") {
  Scratch s;
  at::Tensor t = at::ones({2});
  aoti_torch_print_tensor_handle(handle(t), "before_launch - kern - buf0");
  aoti_torch_print_tensor_handle(nullptr, nullptr);
  const std::string out = s.output();
  CHECK(out.find("[aoti-debug-printer] before_launch - kern - buf0") == 0);
  CHECK(out.find("null tensor handle") != std::string::npos);
}

TEST_CASE("saved files round-trip through the pickler", "[aoti_torch_save_tensor_handle]") {
  Scratch s;
  for (const auto dtype : {at::kFloat, at::kBFloat16, at::kLong, at::kBool, at::kComplexFloat}) {
    CAPTURE(c10::toString(dtype));
    at::Tensor t = at::arange(6, at::kFloat).reshape({2, 3}).to(dtype);
    at::Tensor view = t.t();
    aoti_torch_save_tensor_handle(handle(view), "buf:0", "after_launch", "kern");
  }
  const std::vector<fs::path> files = s.snapshots();
  REQUIRE(files.size() == 5);
  for (const auto& f : files) {
    CHECK(f.filename().string().find(':') == std::string::npos);
    const std::string bytes = slurp(f);
    const at::Tensor back =
        torch::pickle_load(std::vector<char>(bytes.begin(), bytes.end())).toTensor();
    CHECK(back.sizes() == at::IntArrayRef({3, 2}));
    const at::Tensor expected =
        at::arange(6, at::kFloat).reshape({2, 3}).to(back.scalar_type()).t();
    CHECK(at::equal(back.to(at::kDouble), expected.to(at::kDouble)));
  }
  const std::string manifest = slurp(s.dump / "manifest.jsonl");
  // Five snapshots, after the run's environment record.
  CHECK(std::count(manifest.begin(), manifest.end(), '\n') == 6);
  CHECK(manifest.rfind("{\"event\": \"environment\", ", 0) == 0);
  CHECK(manifest.find("\"arg\": \"buf:0\"") != std::string::npos);
  CHECK(manifest.find("\"file\": \"") != std::string::npos);
  // Upstream's launch prefix is a label, never a phase the tools match on.
  CHECK(manifest.find("\"phase\": \"upstream\", \"label\": \"after_launch\"") != std::string::npos);
}

TEST_CASE(
    "a snapshot goes to its file as it is made: torch::pickle_save's bytes, and nothing left "
    "where the disk is full",
    "[aoti_torch_save_tensor_handle]") {
  Scratch s;
  // 4 MiB, and a transposed view of it: larger than any buffer on the way.
  at::Tensor big = at::arange(1 << 20, at::kFloat).reshape({1024, 1024});
  aoti_torch_save_tensor_handle(handle(big), "big", "after_launch", "kern");
  at::Tensor view = big.t();
  aoti_torch_save_tensor_handle(handle(view), "view", "after_launch", "kern");
  std::vector<fs::path> files = s.snapshots();
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() == 2);
  const std::vector<char> whole = torch::pickle_save(big), transposed = torch::pickle_save(view);
  CHECK(slurp(files[0]) == std::string(whole.begin(), whole.end()));
  CHECK(slurp(files[1]) == std::string(transposed.begin(), transposed.end()));

  // A file may not grow past 64 KiB: the snapshot's write stops short, as
  // on a full disk (SIGXFSZ ignored, so write() returns the short count).
  struct rlimit saved {};
  REQUIRE(getrlimit(RLIMIT_FSIZE, &saved) == 0);
  struct rlimit tight = saved;
  tight.rlim_cur = 64 << 10;
  auto* previous = std::signal(SIGXFSZ, SIG_IGN);
  const int64_t failures = aoti_debug_printer::save_failures();
  REQUIRE(setrlimit(RLIMIT_FSIZE, &tight) == 0);
  aoti_torch_save_tensor_handle(handle(big), "cut", "after_launch", "kern");
  setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, previous);
  CHECK(aoti_debug_printer::save_failures() - failures == 1);
  // Neither a partial snapshot nor its temporary file.
  CHECK(s.snapshots().size() == 2);
  // The record stays, with why it has no file: the value is lost, not unwritten.
  const std::string manifest = slurp(s.dump / "manifest.jsonl");
  const std::string last = manifest.substr(manifest.rfind('\n', manifest.size() - 2) + 1);
  CHECK(last.find("\"arg\": \"cut\"") != std::string::npos);
  CHECK(last.find("\"unsaved\": \"") != std::string::npos);
  CHECK(last.find("\"file\"") == std::string::npos);
}

// LibTorch's unpickler cannot read these (Python's torch.load can: see
// test_shim.py); check the archive holds the compact bytes and names the dtype.
TEST_CASE("dtypes without a storage class are saved as Python's torch.save does",
          "[aoti_torch_save_tensor_handle]") {
  Scratch s;
  const at::Tensor t = at::arange(6, at::kFloat).reshape({2, 3}).to(at::kFloat8_e4m3fn);
  at::Tensor view = t.t();
  aoti_torch_save_tensor_handle(handle(view), "buf0", "after_launch", "kern");
  const std::vector<fs::path> files = s.snapshots();
  REQUIRE(files.size() == 1);
  caffe2::serialize::PyTorchStreamReader reader(files[0].string());
  const auto [pickle, pickle_size] = reader.getRecord("data.pkl");
  const std::string program(static_cast<const char*>(pickle.get()), pickle_size);
  CHECK(program.find("torch._utils\n_rebuild_tensor_v3\n") != std::string::npos);
  CHECK(program.find("torch\nfloat8_e4m3fn\n") != std::string::npos);
  const auto [data, size] = reader.getRecord("data/0");
  const at::Tensor compact = view.contiguous();
  REQUIRE(size == 6);
  CHECK(std::memcmp(data.get(), compact.const_data_ptr(), size) == 0);
}

TEST_CASE("snapshots are never overwritten and names cannot escape",
          "[aoti_debug_printer_tensor]") {
  Scratch s;
  at::Tensor t = at::ones({2});
  for (int i = 0; i < 3; ++i) {
    aoti_debug_printer_tensor(AOTI_DEBUG_PRINTER_LEVEL_SAVE, 0, "../../../etc/passwd", "..",
                              handle(t));
  }
  int count = 0;
  for (const auto& e : fs::recursive_directory_iterator(s.dir)) {
    if (e.path().extension() != ".pt") continue;
    ++count;
    CHECK(e.path().parent_path() == s.dump);
    CHECK(e.path().filename().string().find('/') == std::string::npos);
  }
  CHECK(count == 3);
  CHECK_FALSE(fs::exists(s.dir / "etc"));
}

TEST_CASE("one name saved again and again keeps every snapshot",
          "[aoti_torch_save_tensor_handle]") {
  Scratch s;
  at::Tensor t = at::ones({1});
  // Upstream's saves outside our runs name no launch: each of these has the
  // same name, taken by the ones before it. More than the 10,001 names the
  // search for a free one used to try before giving up.
  constexpr int kSaves = 10050;
  for (int i = 0; i < kSaves; ++i) {
    aoti_torch_save_tensor_handle(handle(t), "buf0", "before_launch", "kern");
  }
  const std::vector<fs::path> files = s.snapshots();
  CHECK(files.size() == kSaves);
  CHECK(std::count_if(files.begin(), files.end(), [](const fs::path& f) {
          return f.filename().string().rfind(".tmp-", 0) == 0;
        }) == 0);
}

TEST_CASE("names are data: any bytes stay one valid UTF-8 line, and file names stay short",
          "[aoti_torch_save_tensor_handle]") {
  Scratch s;
  at::Tensor t = at::ones({2});
  // Not UTF-8, a line separator, a newline and a terminal escape.
  const std::string hostile = "k\xff\xfe\xe2\x80\xa8x\n[aoti-debug-printer] forged\x1b[31m";
  REQUIRE(aoti_debug_printer_set_option("format", "jsonl") == 0);
  aoti_debug_printer_tensor(AOTI_DEBUG_PRINTER_LEVEL_PRINT, 1, hostile.c_str(), "x", handle(t));
  const std::string jsonl = s.output();
  CHECK(std::count(jsonl.begin(), jsonl.end(), '\n') == 1);
  REQUIRE(aoti_debug_printer_set_option("format", "text") == 0);
  aoti_debug_printer_tensor(AOTI_DEBUG_PRINTER_LEVEL_PRINT, 1, hostile.c_str(), "x", handle(t));
  const std::string out = s.output();
  // Every byte ASCII (the only non-ASCII ones were escaped), and no line
  // the name forged.
  CHECK(std::all_of(out.begin(), out.end(), [](char c) { return (c & 0x80) == 0; }));
  CHECK(out.find('\x1b') == std::string::npos);
  CHECK(out.find("\n[aoti-debug-printer] forged") == std::string::npos);
  CHECK(out.find(
            "\"kernel\": \"k\\\\xff\\\\xfe\\u2028x\\n[aoti-debug-printer] forged\\u001b[31m\"") !=
        std::string::npos);
  CHECK(out.find("after_launch k\\xff\\xfe\\u2028x\\n[aoti-debug-printer] forged\\x1b[31m x") !=
        std::string::npos);

  // Upstream's save takes a launch prefix of any length: the file name is
  // capped (with a digest), the snapshot and its record kept whole.
  const std::string prefix(100000, 'p'), kernel(300, 'k'), name(300, 'n');
  aoti_torch_save_tensor_handle(handle(t), name.c_str(), prefix.c_str(), kernel.c_str());
  aoti_torch_save_tensor_handle(handle(t), (name + "2").c_str(), prefix.c_str(), kernel.c_str());
  const std::vector<fs::path> files = s.snapshots();
  REQUIRE(files.size() == 2);
  CHECK(files[0].filename() != files[1].filename());
  for (const auto& f : files) CHECK(f.filename().string().size() < 255);
  const std::string manifest = slurp(s.dump / "manifest.jsonl");
  CHECK(manifest.find("\"arg\": \"" + name + "2\"") != std::string::npos);
}

TEST_CASE("a manifest line cut short by a full disk is cut off again",
          "[aoti_debug_printer_tensor]") {
  Scratch s;
  fs::create_directories(s.dump);
  const std::string whole = "{\"event\": \"launch\"}\n";
  aoti_debug_printer::append_to_manifest(s.dump.string(), whole);
  // The file may grow 10 bytes more: the next line's write() stops short,
  // as on a full disk (SIGXFSZ ignored, so write() returns the short count).
  struct rlimit saved {};
  REQUIRE(getrlimit(RLIMIT_FSIZE, &saved) == 0);
  struct rlimit tight = saved;
  tight.rlim_cur = whole.size() + 10;
  auto* previous = std::signal(SIGXFSZ, SIG_IGN);
  REQUIRE(setrlimit(RLIMIT_FSIZE, &tight) == 0);
  CHECK_THROWS(
      aoti_debug_printer::append_to_manifest(s.dump.string(), std::string(100, 'x') + "\n"));
  setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, previous);
  CHECK(slurp(s.dump / "manifest.jsonl") == whole);
}

TEST_CASE("an unusable dump directory gives one error and no exception",
          "[aoti_debug_printer_tensor]") {
  Scratch s;
  const fs::path blocker = s.dir / "not_a_dir";
  std::ofstream(blocker) << "x";
  REQUIRE(aoti_debug_printer_set_option("dump_dir", (blocker / "sub").c_str()) == 0);
  const int64_t before = aoti_debug_printer::save_failures();
  at::Tensor t = at::ones({2});
  for (int i = 0; i < 3; ++i) {
    aoti_debug_printer_tensor(AOTI_DEBUG_PRINTER_LEVEL_SAVE, 0, "k", "x", handle(t));
  }
  aoti_debug_printer_int64(AOTI_DEBUG_PRINTER_LEVEL_SAVE, 0, "k", "n", 3);
  CHECK(aoti_debug_printer::save_failures() - before == 4);
}

TEST_CASE("scalars print in their own type's format", "[aoti_debug_printer_int64]") {
  Scratch s;
  aoti_debug_printer_int64(AOTI_DEBUG_PRINTER_LEVEL_PRINT, 0, "k", "ks0", -42);
  aoti_debug_printer_float64(AOTI_DEBUG_PRINTER_LEVEL_PRINT, 0, "k", "eps", 1e-5);
  aoti_debug_printer_bool(AOTI_DEBUG_PRINTER_LEVEL_PRINT, 0, "k", "flag", 1);
  const std::string out = s.output();
  CHECK(out.find("k ks0 = -42 (int64)") != std::string::npos);
  CHECK(out.find("k eps = 1.0000000000000001e-05 (float64)") != std::string::npos);
  CHECK(out.find("k flag = true (bool)") != std::string::npos);
}

TEST_CASE("runs, launches and call indices", "[aoti_debug_printer_launch_at_level]") {
  Scratch s;
  aoti_debug_printer_begin_run();
  aoti_debug_printer_launch_at_level(AOTI_DEBUG_PRINTER_LEVEL_PRINT,
                                     AOTI_DEBUG_PRINTER_BEFORE_LAUNCH, "a", 1);
  aoti_debug_printer_launch_at_level(AOTI_DEBUG_PRINTER_LEVEL_PRINT,
                                     AOTI_DEBUG_PRINTER_AFTER_LAUNCH, "a", 1);
  aoti_debug_printer_launch_at_level(AOTI_DEBUG_PRINTER_LEVEL_PRINT,
                                     AOTI_DEBUG_PRINTER_BEFORE_LAUNCH, "b", 0);
  aoti_debug_printer_launch_at_level(AOTI_DEBUG_PRINTER_LEVEL_PRINT,
                                     AOTI_DEBUG_PRINTER_BEFORE_LAUNCH, "a", 1);
  const std::string out = s.output();
  const std::regex re("before_launch a \\(run (\\d+), launch 2, call 1\\)");
  CHECK(std::regex_search(out, re));
  CHECK(out.find(" b ") == std::string::npos);
  CHECK(std::count(out.begin(), out.end(), '\n') == 3);
}

TEST_CASE("records of concurrent threads never interleave", "[aoti_debug_printer_tensor]") {
  Scratch s;
  constexpr int kThreads = 8, kRecords = 40;
  std::vector<std::thread> pool;
  for (int i = 0; i < kThreads; ++i) {
    pool.emplace_back([i] {
      at::Tensor t = at::full({4}, static_cast<double>(i));
      const std::string arg = "thread" + std::to_string(i);
      aoti_debug_printer_begin_run();
      for (int j = 0; j < kRecords; ++j) {
        aoti_debug_printer_launch_at_level(AOTI_DEBUG_PRINTER_LEVEL_PRINT,
                                           AOTI_DEBUG_PRINTER_BEFORE_LAUNCH, "k", 0);
        aoti_debug_printer_tensor(AOTI_DEBUG_PRINTER_LEVEL_PRINT, 0, "k", arg.c_str(), handle(t));
      }
    });
  }
  for (auto& t : pool) t.join();
  // Each record is 5 lines: header, metadata, statistics, counts, values,
  // and the values must be those of the thread the header names.
  std::istringstream in(s.output());
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  REQUIRE(lines.size() == static_cast<size_t>(kThreads * kRecords * 5));
  std::vector<int> last_launch(kThreads, -1);
  const std::regex head(
      "^\\[aoti-debug-printer\\] before_launch k thread(\\d) \\(run \\d+, launch (\\d+), call "
      "(\\d+)\\)$");
  for (size_t i = 0; i < lines.size(); i += 5) {
    std::smatch m;
    REQUIRE(std::regex_match(lines[i], m, head));
    const int thread = std::stoi(m[1]);
    const int launch = std::stoi(m[2]);
    CHECK(launch == last_launch[thread] + 1);
    CHECK(m[3] == m[2]);
    last_launch[thread] = launch;
    CHECK(lines[i + 4] == "    values=[" + std::to_string(thread) + ", " + std::to_string(thread) +
                              ", " + std::to_string(thread) + ", " + std::to_string(thread) + "]");
  }
}

namespace {

// A record that waits for something other than a GPU: it lands when the
// test says so, and tells which thread made its text.
struct FakeLateRecord final : aoti_debug_printer::LateRecord {
  std::string line;
  std::shared_ptr<std::atomic<bool>> landed = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<std::atomic<bool>> on_this_thread;
  std::thread::id queued_by = std::this_thread::get_id();
  bool throws = false;
  bool ready() const override { return landed->load(); }
  void wait() override { landed->store(true); }
  std::string text() override {
    if (on_this_thread) on_this_thread->store(std::this_thread::get_id() == queued_by);
    if (throws) throw std::runtime_error("the fake record failed");
    return line + "\n";
  }
};

// Polls `done` for up to ten seconds.
template <typename F>
bool eventually(F done) {
  for (int i = 0; i < 1000 && !done(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

}  // namespace

TEST_CASE("records that wait are written by the writer thread, in order, as they land",
          "[emit_later]") {
  Scratch s;
  const std::string out = s.out.string();
  std::vector<std::shared_ptr<std::atomic<bool>>> landed;
  auto written_by_writer = std::make_shared<std::atomic<bool>>(false);
  for (int i = 0; i < 6; ++i) {
    auto r = std::make_unique<FakeLateRecord>();
    r->line = "late" + std::to_string(i);
    landed.push_back(r->landed);
    if (i == 0) r->on_this_thread = written_by_writer;
    aoti_debug_printer::emit_later(out, std::move(r));
    // A synchronous text waits behind the records queued before it.
    if (i == 2) aoti_debug_printer::emit(out, "sync\n");
  }
  CHECK(aoti_debug_printer::records_waiting());
  // Handed to the writer thread at once, as a launch event does.
  aoti_debug_printer::publish_records();
  landed[1]->store(true);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(s.output().empty());  // the first has not landed: nothing may pass it
  landed[0]->store(true);
  landed[3]->store(true);
  REQUIRE(eventually([&] { return s.output() == "late0\nlate1\n"; }));
  CHECK_FALSE(written_by_writer->load());  // written off this thread
  landed[2]->store(true);
  REQUIRE(eventually([&] { return s.output() == "late0\nlate1\nlate2\nsync\nlate3\n"; }));
  // What has not landed, this thread waits for itself.
  aoti_debug_printer::flush_records();
  CHECK(s.output() == "late0\nlate1\nlate2\nsync\nlate3\nlate4\nlate5\n");
  CHECK_FALSE(aoti_debug_printer::records_waiting());
  aoti_debug_printer::emit(out, "after\n");  // nothing waits: written at once
  CHECK(s.output() == "late0\nlate1\nlate2\nsync\nlate3\nlate4\nlate5\nafter\n");
}

TEST_CASE(
    "threads that queue records at once each keep their order, and a failing record "
    "does not stop the others",
    "[emit_later]") {
  Scratch s;
  const std::string out = s.out.string();
  constexpr int kThreads = 4, kRecords = 300;
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t) {
    pool.emplace_back([&, t] {
      for (int i = 0; i < kRecords; ++i) {
        auto r = std::make_unique<FakeLateRecord>();
        r->line = "t" + std::to_string(t) + " " + std::to_string(i);
        r->landed->store(i % 7 != 0);  // some land only when waited for
        r->throws = t == 0 && i == 5;
        aoti_debug_printer::emit_later(out, std::move(r));
        if (i % 50 == 0) aoti_debug_printer::emit(out, "t" + std::to_string(t) + " sync\n");
      }
      // The thread's exit writes what is left.
    });
  }
  for (auto& th : pool) th.join();
  std::istringstream in(s.output());
  std::vector<std::vector<std::string>> seen(kThreads);
  for (std::string line; std::getline(in, line);) {
    const int t = line[1] - '0';
    REQUIRE((t >= 0 && t < kThreads));
    seen[t].push_back(line.substr(line.find(' ') + 1));
  }
  for (int t = 0; t < kThreads; ++t) {
    std::vector<std::string> want;
    for (int i = 0; i < kRecords; ++i) {
      if (!(t == 0 && i == 5)) want.push_back(std::to_string(i));
      if (i % 50 == 0) want.push_back("sync");
    }
    CHECK(seen[t] == want);
  }
}

TEST_CASE("a forked child starts with a queue and a writer of its own", "[emit_later]") {
  Scratch s;
  const std::string out = s.out.string();
  auto pending = std::make_unique<FakeLateRecord>();
  pending->line = "parent";
  auto landed = pending->landed;
  aoti_debug_printer::emit_later(out, std::move(pending));
  aoti_debug_printer::publish_records();  // the writer runs from here
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // The parent's record is the parent's: nothing waits here, a text goes
    // out at once, and a record queued here has a writer.
    const bool fresh = !aoti_debug_printer::records_waiting();
    aoti_debug_printer::emit(out, "child sync\n");
    auto late = std::make_unique<FakeLateRecord>();
    late->line = "child late";
    late->landed->store(true);
    aoti_debug_printer::emit_later(out, std::move(late));
    aoti_debug_printer::publish_records();
    const bool written = eventually([&] { return !aoti_debug_printer::records_waiting(); });
    _exit(fresh && written ? 0 : 1);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(s.output() == "child sync\nchild late\n");
  landed->store(true);
  aoti_debug_printer::flush_records();
  CHECK(s.output() == "child sync\nchild late\nparent\n");
}

TEST_CASE("the ABI table and the header's loader find this library",
          "[aoti_debug_printer_get_api]") {
  CHECK(aoti_debug_printer_get_api(AOTI_DEBUG_PRINTER_ABI_VERSION + 1) == nullptr);
  const aoti_debug_printer_api* api = aoti_debug_printer_get_api(AOTI_DEBUG_PRINTER_ABI_VERSION);
  REQUIRE(api != nullptr);
  CHECK(api->size == sizeof(aoti_debug_printer_api));
  Dl_info info{};
  REQUIRE(dladdr(reinterpret_cast<void*>(&aoti_debug_printer_get_api), &info) != 0);
  CHECK(aoti_debug_printer::load_api(info.dli_fname) == api);

  // What generated code does with a tensor, an int, a double and a bool.
  Scratch s;
  at::Tensor t = at::ones({1});
  AtenTensorHandle h = handle(t);
  aoti_debug_printer::value(api, AOTI_DEBUG_PRINTER_LEVEL_PRINT, 0, "k", "buf", h);
  aoti_debug_printer::value(api, AOTI_DEBUG_PRINTER_LEVEL_PRINT, 0, "k", "i", int32_t{7});
  aoti_debug_printer::value(api, AOTI_DEBUG_PRINTER_LEVEL_PRINT, 0, "k", "f", 0.5f);
  aoti_debug_printer::value(api, AOTI_DEBUG_PRINTER_LEVEL_PRINT, 0, "k", "b", false);
  const std::string out = s.output();
  CHECK(out.find("k buf") != std::string::npos);
  CHECK(out.find("k i = 7 (int64)") != std::string::npos);
  CHECK(out.find("k f = 0.5 (float64)") != std::string::npos);
  CHECK(out.find("k b = false (bool)") != std::string::npos);
}

TEST_CASE("a package of ABI 5 or older passes its level 3 as launch flag 2",
          "[aoti_debug_printer_launch]") {
  Scratch s;
  CHECK(aoti_debug_printer_set_option("guard", "1") == 0);
  // The write guard watches the kernels of levels 1 and 2 only: a kernel that
  // writes an argument it only reads is stopped after a level-2 launch, and
  // let be after a level-3 one.
  const auto kernel_writes_its_input = [](const auto& launch) {
    at::Tensor t = at::ones({4});
    aoti_debug_printer_begin_run();
    launch(AOTI_DEBUG_PRINTER_BEFORE_LAUNCH);
    aoti_debug_printer_tensor_held(AOTI_DEBUG_PRINTER_LEVEL_PRINT, AOTI_DEBUG_PRINTER_BEFORE_LAUNCH,
                                   "k", "in", "", "", AOTI_DEBUG_PRINTER_ROLE_READ, handle(t));
    launch(AOTI_DEBUG_PRINTER_AFTER_LAUNCH);
    t[2].fill_(5.0);
    return aoti_debug_printer_tensor_held(AOTI_DEBUG_PRINTER_LEVEL_PRINT,
                                          AOTI_DEBUG_PRINTER_AFTER_LAUNCH, "k", "in", "", "",
                                          AOTI_DEBUG_PRINTER_ROLE_READ, handle(t));
  };
  for (const int32_t level :
       {AOTI_DEBUG_PRINTER_LEVEL_PRINT, AOTI_DEBUG_PRINTER_LEVEL_KERNEL_NAMES}) {
    const int32_t expected =
        level == AOTI_DEBUG_PRINTER_LEVEL_PRINT ? AOTI_DEBUG_PRINTER_STOPPED_BY_GUARD : 0;
    CHECK(kernel_writes_its_input([level](int32_t phase) {
            aoti_debug_printer_launch_at_level(level, phase, "k", 0);
          }) == expected);
    const int32_t legacy_flags = level == AOTI_DEBUG_PRINTER_LEVEL_KERNEL_NAMES ? 2 : 0;
    CHECK(kernel_writes_its_input([legacy_flags](int32_t phase) {
            aoti_debug_printer_launch(phase, "k", legacy_flags);
          }) == expected);
  }
  CHECK(aoti_debug_printer_set_option("guard", "0") == 0);
}

TEST_CASE(
    "the header's Run begins and ends a run, and begins only with a table that has no end_run",
    "[aoti_debug_printer_end_run]") {
  const aoti_debug_printer_api* api = aoti_debug_printer_get_api(AOTI_DEBUG_PRINTER_ABI_VERSION);
  REQUIRE(api != nullptr);
  Scratch s;
  at::Tensor t = at::full({2}, 3.0);
  {
    aoti_debug_printer::Run run(api);
    aoti_debug_printer::launch(api, AOTI_DEBUG_PRINTER_LEVEL_PRINT,
                               AOTI_DEBUG_PRINTER_BEFORE_LAUNCH, "k", 0);
    aoti_debug_printer::value(api, AOTI_DEBUG_PRINTER_LEVEL_PRINT, 0, "k", "in_run", handle(t));
  }
  // Every record of the run is out once it has ended.
  CHECK(s.output().find("before_launch k in_run (run ") != std::string::npos);
  CHECK(s.output().find("values=[3, 3]") != std::string::npos);
  // A library of ABI 3: the table ends before begin_run_with_end.
  aoti_debug_printer_api v3 = *api;
  v3.size = offsetof(aoti_debug_printer_api, begin_run_with_end);
  v3.begin_run_with_end = nullptr;
  v3.end_run = nullptr;
  {
    aoti_debug_printer::Run run(&v3);
    aoti_debug_printer::launch(&v3, AOTI_DEBUG_PRINTER_LEVEL_PRINT,
                               AOTI_DEBUG_PRINTER_BEFORE_LAUNCH, "k", 0);
    aoti_debug_printer::value(&v3, AOTI_DEBUG_PRINTER_LEVEL_PRINT, 0, "k", "old_library",
                              handle(t));
  }
  CHECK(std::regex_search(
      s.output(), std::regex("before_launch k old_library \\(run \\d+, launch 0, call \\d+\\)")));
  // No library at all: nothing happens, nothing throws.
  { aoti_debug_printer::Run run(nullptr); }
}

TEST_CASE("records ended by records_end, continued or not, are the records without it",
          "[aoti_debug_printer_records_end]") {
  const aoti_debug_printer_api* api = aoti_debug_printer_get_api(AOTI_DEBUG_PRINTER_ABI_VERSION);
  REQUIRE(api != nullptr);
  REQUIRE(api->records_end == &aoti_debug_printer_records_end);
  // A library of ABI 6 has no records_end: the header's helper leaves it out.
  aoti_debug_printer_api v6 = *api;
  v6.size = offsetof(aoti_debug_printer_api, records_end);
  v6.records_end = nullptr;
  at::Tensor a = at::arange(6.0).reshape({2, 3});
  at::Tensor b = at::full({4}, -1.5);
  // Two kernels as generated code calls them, the second event continuing
  // the first's records where `flags` say so; the run's records, run and
  // process stripped.
  const auto run_of = [&](const aoti_debug_printer_api* table, int32_t first, int32_t second) {
    Scratch s;
    {
      aoti_debug_printer::Run run(table);
      aoti_debug_printer::launch(table, AOTI_DEBUG_PRINTER_LEVEL_PRINT,
                                 AOTI_DEBUG_PRINTER_AFTER_LAUNCH, "k1", first);
      aoti_debug_printer::value(table, AOTI_DEBUG_PRINTER_LEVEL_PRINT, 1, "k1", "a", handle(a));
      if (!(second & AOTI_DEBUG_PRINTER_RECORDS_CONTINUE)) aoti_debug_printer::records_end(table);
      aoti_debug_printer::launch(table, AOTI_DEBUG_PRINTER_LEVEL_PRINT,
                                 AOTI_DEBUG_PRINTER_BEFORE_LAUNCH, "k2", second);
      aoti_debug_printer::value(table, AOTI_DEBUG_PRINTER_LEVEL_PRINT, 0, "k2", "b", handle(b));
      aoti_debug_printer::records_end(table);
    }
    return std::regex_replace(s.output(), std::regex("run \\d+"), "run R");
  };
  const std::string plain = run_of(api, 0, 0);
  CHECK(plain.find("after_launch k1 a") != std::string::npos);
  CHECK(plain.find("values=[-1.5, -1.5, -1.5, -1.5]") != std::string::npos);
  constexpr int32_t end = AOTI_DEBUG_PRINTER_RECORDS_END;
  CHECK(run_of(api, end, end) == plain);
  CHECK(run_of(api, end, end | AOTI_DEBUG_PRINTER_RECORDS_CONTINUE) == plain);
  CHECK(run_of(&v6, end, end | AOTI_DEBUG_PRINTER_RECORDS_CONTINUE) == plain);
}

TEST_CASE("a launch event's host records are written together, before its kernel",
          "[aoti_debug_printer_records_end]") {
  Scratch s;
  at::Tensor t = at::full({100}, 2.0);
  at::Tensor u = at::full({3}, 1.0);
  const auto record = [](int32_t phase, const char* kernel, const char* arg, at::Tensor& x,
                         int32_t role) {
    aoti_debug_printer_tensor_held(AOTI_DEBUG_PRINTER_LEVEL_PRINT, phase, kernel, arg, "", "", role,
                                   handle(x));
  };
  const auto launch = [](int32_t phase, const char* kernel, int32_t flags) {
    aoti_debug_printer_launch_at_level(AOTI_DEBUG_PRINTER_LEVEL_PRINT, phase, kernel, flags);
  };
  const auto has = [&](const std::string& header) {
    return s.output().find(header) != std::string::npos;
  };
  constexpr int32_t before = AOTI_DEBUG_PRINTER_BEFORE_LAUNCH;
  constexpr int32_t after = AOTI_DEBUG_PRINTER_AFTER_LAUNCH;
  constexpr int32_t read = AOTI_DEBUG_PRINTER_ROLE_READ;
  constexpr int32_t end = AOTI_DEBUG_PRINTER_RECORDS_END;
  aoti_debug_printer_begin_run_with_end();
  launch(before, "k1", end);
  record(before, "k1", "t", t, read);
  record(before, "k1", "u", u, read);
  // Held with the rest of the event: records_end, which generated code calls
  // before the kernel, writes them, in order.
  CHECK_FALSE(has("before_launch k1 t "));
  aoti_debug_printer_records_end();
  const std::string out = s.output();
  REQUIRE(out.find("before_launch k1 t ") != std::string::npos);
  CHECK(out.find("before_launch k1 u ") > out.find("before_launch k1 t "));
  // Records that continue into the next event are held into it, and an
  // event that follows without continuing writes what is held.
  launch(after, "k1", end);
  record(after, "k1", "t", t, AOTI_DEBUG_PRINTER_ROLE_WRITE);
  launch(before, "k2", end | AOTI_DEBUG_PRINTER_RECORDS_CONTINUE);
  record(before, "k2", "t", t, read);
  CHECK_FALSE(has("after_launch k1 t "));
  launch(after, "k2", 0);
  CHECK(has("after_launch k1 t "));
  CHECK(has("before_launch k2 t "));
  // An event whose records no records_end follows writes each at once.
  record(after, "k2", "t", t, AOTI_DEBUG_PRINTER_ROLE_WRITE);
  CHECK(has("after_launch k2 t "));
  aoti_debug_printer_end_run();
  // So does a run without an end, whose records never wait.
  aoti_debug_printer_begin_run();
  launch(before, "k3", end);
  record(before, "k3", "t", t, read);
  CHECK(has("before_launch k3 t "));
  aoti_debug_printer_records_end();
  aoti_debug_printer_end_run();
}

TEST_CASE("a tensor recorded again where the wrapper ran nothing between is read once",
          "[aoti_debug_printer_launch_at_level]") {
  Scratch s;
  // More elements than max_values: the record carries statistics, no values.
  at::Tensor t = at::full({100}, 2.0);
  at::Tensor head = t.slice(0, 0, 50);
  constexpr int32_t before = AOTI_DEBUG_PRINTER_BEFORE_LAUNCH;
  constexpr int32_t after = AOTI_DEBUG_PRINTER_AFTER_LAUNCH;
  aoti_debug_printer_begin_run_with_end();
  printing_launch(after, "k1", 0);
  printed(after, "k1", "out", t, AOTI_DEBUG_PRINTER_ROLE_WRITE);
  // The flag says nothing ran between: the change made here, which the flag
  // rules out in generated code, shows that the tensor is not read again.
  t.fill_(3.0);
  printing_launch(before, "k2", AOTI_DEBUG_PRINTER_RECORDS_CONTINUE);
  printed(before, "k2", "in", t, AOTI_DEBUG_PRINTER_ROLE_READ);
  // Another view of the same memory is another tensor: read.
  printed(before, "k2", "head", head, AOTI_DEBUG_PRINTER_ROLE_READ);
  // What the stretch keeps of a read holds no memory: a tensor freed after
  // its record goes back to the allocator at once, as with the printer off.
  at::Tensor freed = at::full({100}, 4.0);
  const c10::weak_intrusive_ptr<c10::StorageImpl> storage = freed.storage().getWeakStorageImpl();
  printed(before, "k2", "freed", freed, AOTI_DEBUG_PRINTER_ROLE_READ);
  freed.reset();
  CHECK(storage.expired());
  aoti_debug_printer_records_end();
  printing_launch(after, "k2", 0);
  // Any other event ends the stretch: what a tensor holds is read again.
  printing_launch(before, "k3", 0);
  printed(before, "k3", "in", t, AOTI_DEBUG_PRINTER_ROLE_READ);
  aoti_debug_printer_end_run();
  // Outside a run's launch events (upstream's print between the built-in's
  // kernels) every record reads.
  aoti_torch_print_tensor_handle(handle(t), "upstream_first");
  t.fill_(5.0);
  aoti_torch_print_tensor_handle(handle(t), "upstream_second");
  const std::string out = s.output();
  const auto min_of = [&](const std::string& header) { return field_after(out, header, "min"); };
  CHECK(min_of("after_launch k1 out ") == "2");
  CHECK(min_of("before_launch k2 in ") == "2");
  CHECK(min_of("before_launch k2 head ") == "3");
  CHECK(min_of("before_launch k3 in ") == "3");
  CHECK(min_of("upstream_first") == "3");
  CHECK(min_of("upstream_second") == "5");
}

TEST_CASE("a tensor no kernel wrote since its record is read once, across kernels",
          "[aoti_debug_printer_launch_at_level]") {
  Scratch s;
  at::Tensor t = at::full({100}, 2.0);
  at::Tensor head = t.slice(0, 0, 50);
  at::Tensor input = at::full({100}, 7.0);
  constexpr int32_t before = AOTI_DEBUG_PRINTER_BEFORE_LAUNCH;
  constexpr int32_t after = AOTI_DEBUG_PRINTER_AFTER_LAUNCH;
  constexpr int32_t go_on = AOTI_DEBUG_PRINTER_RECORDS_CONTINUE;
  constexpr int32_t read = AOTI_DEBUG_PRINTER_ROLE_READ;
  // Each change made here behind the records' backs, which generated code's
  // roles and flags rule out, shows whether a tensor was read again.
  aoti_debug_printer_begin_run_with_end();
  printed(AOTI_DEBUG_PRINTER_MODEL_INPUT, "", "input", input, read);
  input.fill_(8.0);
  // The first kernel's records continue the run's start: the input is read once.
  printing_launch(before, "k1", go_on);
  printed(before, "k1", "input", input, read);
  aoti_debug_printer_records_end();
  printing_launch(after, "k1", 0);
  printed(after, "k1", "out", t, AOTI_DEBUG_PRINTER_ROLE_WRITE);
  t.fill_(3.0);
  printing_launch(before, "k2", go_on);
  printed(before, "k2", "in", t, read);
  printed(before, "k2", "head", head, read);
  aoti_debug_printer_records_end();
  // k2's records say it only reads t: what was read of t holds after it.
  printing_launch(after, "k2", 0);
  printed(after, "k2", "in", t, read);
  t.fill_(4.0);
  printing_launch(before, "k3", go_on);
  printed(before, "k3", "residual", t, read);
  aoti_debug_printer_records_end();
  // k3 writes t in place: t and every view of its memory are read again.
  t.fill_(5.0);
  printing_launch(after, "k3", 0);
  printed(after, "k3", "residual", t, AOTI_DEBUG_PRINTER_ROLE_READ_WRITE);
  // k4 may write memory none of its records name: after it, nothing read holds.
  printing_launch(before, "k4", AOTI_DEBUG_PRINTER_WRITES_UNSEEN | go_on);
  printed(before, "k4", "head", head, read);
  aoti_debug_printer_records_end();
  printing_launch(after, "k4", 0);
  t.fill_(6.0);
  printing_launch(before, "k5", go_on);
  printed(before, "k5", "t", t, read);
  aoti_debug_printer_records_end();
  // Nor where the wrapper may have run something between two events.
  printing_launch(after, "k5", 0);
  t.fill_(9.0);
  printing_launch(before, "k6", 0);
  printed(before, "k6", "t", t, read);
  aoti_debug_printer_records_end();
  aoti_debug_printer_end_run();
  const std::string out = s.output();
  const auto min_of = [&](const std::string& header) { return field_after(out, header, "min"); };
  CHECK(min_of("model_input input ") == "7");
  CHECK(min_of("before_launch k1 input ") == "7");
  CHECK(min_of("before_launch k2 in ") == "2");
  CHECK(min_of("before_launch k2 head ") == "3");
  CHECK(min_of("before_launch k3 residual ") == "2");
  CHECK(min_of("after_launch k3 residual ") == "5");
  CHECK(min_of("before_launch k4 head ") == "5");
  CHECK(min_of("before_launch k5 t ") == "6");
  CHECK(min_of("before_launch k6 t ") == "9");
}

TEST_CASE("a constant is read once a process, while nothing may have written it",
          "[aoti_debug_printer_launch_at_level][aoti_debug_printer_tensor_held]") {
  Scratch s;
  at::Tensor weight = at::full({100}, 1.0);
  // A write through its pointer, behind the records' backs (and its
  // version's), shows whether the constant was read again.
  const auto write = [&](float value) { std::fill_n(weight.data_ptr<float>(), 100, value); };
  const auto run = [&](const char* kernel, int32_t flags, int32_t role_after) {
    aoti_debug_printer_begin_run_with_end();
    printing_launch(AOTI_DEBUG_PRINTER_BEFORE_LAUNCH, kernel, flags);
    printed(AOTI_DEBUG_PRINTER_BEFORE_LAUNCH, kernel, "weight", weight,
            AOTI_DEBUG_PRINTER_ROLE_READ, AOTI_DEBUG_PRINTER_WHY_CONSTANT);
    aoti_debug_printer_records_end();
    aoti_debug_printer_launch_at_level(AOTI_DEBUG_PRINTER_LEVEL_PRINT,
                                       AOTI_DEBUG_PRINTER_AFTER_LAUNCH, kernel, 0);
    printed(AOTI_DEBUG_PRINTER_AFTER_LAUNCH, kernel, "weight", weight, role_after);
    aoti_debug_printer_end_run();
  };
  constexpr int32_t hold = AOTI_DEBUG_PRINTER_CONSTANTS_HOLD;
  constexpr int32_t read = AOTI_DEBUG_PRINTER_ROLE_READ;
  run("k1", hold, read);
  write(2.0);
  // Held from one run to the next: the first run's read serves.
  run("k2", hold, read);
  // The wrapper may have written it (no CONSTANTS_HOLD): read again.
  run("k3", 0, read);
  write(3.0);
  // k4 writes it (a buffer the program mutates): read again after it.
  run("k4", hold, AOTI_DEBUG_PRINTER_ROLE_READ_WRITE);
  write(4.0);
  run("k5", hold, read);
  const std::string out = s.output();
  const auto min_of = [&](const std::string& header) { return field_after(out, header, "min"); };
  CHECK(min_of("before_launch k1 weight ") == "1");
  CHECK(min_of("before_launch k2 weight ") == "1");
  CHECK(min_of("before_launch k3 weight ") == "2");
  CHECK(min_of("before_launch k4 weight ") == "2");
  CHECK(min_of("after_launch k4 weight ") == "3");
  CHECK(min_of("before_launch k5 weight ") == "4");
}

TEST_CASE("a value's formula and its program's Inductor config reach the dump",
          "[aoti_debug_printer_tensor_computed][aoti_debug_printer_compiled_with]") {
  const aoti_debug_printer_api* api = aoti_debug_printer_get_api(AOTI_DEBUG_PRINTER_ABI_VERSION);
  REQUIRE(api != nullptr);
  Scratch s;
  at::Tensor t = at::ones({2});
  const char* formula = R"({"name":"ln/mean","steps":[],"value":{"node":"x"}})";
  {
    aoti_debug_printer::Run run(api, "0123456789ab");
    aoti_debug_printer::launch(api, AOTI_DEBUG_PRINTER_LEVEL_PRINT,
                               AOTI_DEBUG_PRINTER_BEFORE_LAUNCH, "k", 0);
    aoti_debug_printer::value(api, AOTI_DEBUG_PRINTER_LEVEL_SAVE, AOTI_DEBUG_PRINTER_AFTER_LAUNCH,
                              "k", "buf1", handle(t), "", "an intermediate",
                              AOTI_DEBUG_PRINTER_ROLE_WRITE, formula);
    aoti_debug_printer::value(api, AOTI_DEBUG_PRINTER_LEVEL_SAVE, AOTI_DEBUG_PRINTER_AFTER_LAUNCH,
                              "k", "buf2", handle(t), "n", "", AOTI_DEBUG_PRINTER_ROLE_WRITE);
  }
  // The saver's thread writes the run's snapshots behind it.
  aoti_debug_printer::saver::wait_for_saves();
  const std::string manifest = slurp(s.dump / "manifest.jsonl");
  const std::string schema =
      ", \"schema\": " + std::to_string(AOTI_DEBUG_PRINTER_RECORD_SCHEMA) + "}";
  CHECK(manifest.find("\"inductor_config\": \"0123456789ab\"" + schema) != std::string::npos);
  // The formula as a JSON string; a record without one has no such key.
  CHECK(manifest.find(R"("formula": "{\"name\":\"ln/mean\",\"steps\":[],)") != std::string::npos);
  CHECK(std::count(manifest.begin(), manifest.end(), '\n') == 3);
  CHECK(manifest.find("\"formula\"") == manifest.rfind("\"formula\""));
  // A run of a program whose code does not say its config: empty, not the last one's.
  {
    aoti_debug_printer::Run run(api);
    aoti_debug_printer::launch(api, AOTI_DEBUG_PRINTER_LEVEL_PRINT,
                               AOTI_DEBUG_PRINTER_BEFORE_LAUNCH, "k", 0);
    aoti_debug_printer::value(api, AOTI_DEBUG_PRINTER_LEVEL_SAVE, AOTI_DEBUG_PRINTER_AFTER_LAUNCH,
                              "k", "buf3", handle(t));
  }
  aoti_debug_printer::saver::wait_for_saves();
  CHECK(slurp(s.dump / "manifest.jsonl").find("\"inductor_config\": \"\"" + schema) !=
        std::string::npos);
}

TEST_CASE("packages built against ABI 2 still load, and a table without tensor_held is honoured",
          "[aoti_debug_printer_get_api]") {
  CHECK(aoti_debug_printer_get_api(AOTI_DEBUG_PRINTER_OLDEST_ABI_VERSION - 1) == nullptr);
  const aoti_debug_printer_api* v2 = aoti_debug_printer_get_api(2);
  REQUIRE(v2 != nullptr);
  Scratch s;
  REQUIRE(aoti_debug_printer_set_option("format", "jsonl") == 0);
  at::Tensor t = at::ones({1});
  // A version-2 caller: tensor_of_node, the last member its header had.
  v2->tensor_of_node(AOTI_DEBUG_PRINTER_LEVEL_PRINT, 1, "k", "old", "n_old", handle(t));
  // A library whose table ends before tensor_held: the header's helper
  // must not read past `size`, and falls back to tensor_of_node.
  aoti_debug_printer_api old_table = *v2;
  old_table.size = offsetof(aoti_debug_printer_api, tensor_held);
  old_table.tensor_held = nullptr;
  aoti_debug_printer::value(&old_table, AOTI_DEBUG_PRINTER_LEVEL_PRINT, 1, "k", "fallback",
                            handle(t), "n_fallback", "ignored", AOTI_DEBUG_PRINTER_ROLE_WRITE);
  // Before launch: after it, an argument the kernel only reads has no record.
  aoti_debug_printer::value(v2, AOTI_DEBUG_PRINTER_LEVEL_PRINT, 0, "k", "new", handle(t), "",
                            "fused away", AOTI_DEBUG_PRINTER_ROLE_READ);
  REQUIRE(aoti_debug_printer_set_option("format", "text") == 0);
  const std::string out = s.output();
  CHECK(out.find("\"arg\": \"old\"") != std::string::npos);
  CHECK(out.find("\"node\": \"n_old\", \"role\": \"\", \"why\": \"\"") != std::string::npos);
  CHECK(out.find("\"node\": \"n_fallback\", \"role\": \"\", \"why\": \"\"") != std::string::npos);
  CHECK(out.find("\"node\": \"\", \"role\": \"read\", \"why\": \"fused away\"") !=
        std::string::npos);
}

TEST_CASE("run-time level, kernel filter and ranks", "[aoti_debug_printer_set_option]") {
  Scratch s;
  at::Tensor t = at::ones({2});
  const auto one_kernel = [&](const char* kernel, int32_t flags) {
    aoti_debug_printer_launch_at_level(AOTI_DEBUG_PRINTER_LEVEL_PRINT,
                                       AOTI_DEBUG_PRINTER_BEFORE_LAUNCH, kernel, flags);
    aoti_debug_printer_tensor(AOTI_DEBUG_PRINTER_LEVEL_PRINT, AOTI_DEBUG_PRINTER_BEFORE_LAUNCH,
                              kernel, "x", handle(t));
    aoti_debug_printer_launch_at_level(AOTI_DEBUG_PRINTER_LEVEL_PRINT,
                                       AOTI_DEBUG_PRINTER_AFTER_LAUNCH, kernel, flags);
  };
  aoti_debug_printer_begin_run();
  CHECK(aoti_debug_printer_set_option("level", "0") == 0);
  one_kernel("off_kernel", 0);
  CHECK(aoti_debug_printer_set_option("level", "3") == 0);
  one_kernel("named_kernel", 0);
  one_kernel("unselected_kernel", AOTI_DEBUG_PRINTER_UNSELECTED);
  CHECK(aoti_debug_printer_set_option("level", "-1") == 0);
  CHECK(aoti_debug_printer_set_option("kernels", "{TRITON_*, other}") == 0);
  one_kernel("triton_poi_0", 0);
  one_kernel("cpp_fused_0", 0);
  CHECK(aoti_debug_printer_set_option("kernels", "") == 0);
  CHECK(aoti_debug_printer_set_option("rank", "1") == 0);
  CHECK(aoti_debug_printer_set_option("ranks", "0,2-3") == 0);
  one_kernel("rank1_kernel", 0);
  CHECK(aoti_debug_printer_set_option("ranks", "1") == 0);
  one_kernel("rank1_selected", 0);
  CHECK(aoti_debug_printer_set_option("rank", "-1") == 0);
  CHECK(aoti_debug_printer_set_option("ranks", "all") == 0);
  CHECK(aoti_debug_printer_set_option("level", "9") != 0);
  CHECK(aoti_debug_printer_set_option("ranks", "1-x") != 0);

  const std::string out = s.output();
  CHECK(out.find("off_kernel") == std::string::npos);
  // Level 3 at run time: names only, and only of kernels compiled in.
  CHECK(out.find("before_launch named_kernel (run") != std::string::npos);
  CHECK(out.find("after_launch named_kernel (run") != std::string::npos);
  CHECK(out.find("named_kernel x") == std::string::npos);
  CHECK(out.find("unselected_kernel") == std::string::npos);
  CHECK(out.find("before_launch triton_poi_0 x") != std::string::npos);
  CHECK(out.find("cpp_fused_0") == std::string::npos);
  CHECK(out.find("rank1_kernel") == std::string::npos);
  CHECK(out.find("rank 1 before_launch rank1_selected x") != std::string::npos);
}

TEST_CASE("the NaN/Inf trap blames the kernel that made them", "[aoti_debug_printer_tensor]") {
  Scratch s;
  CHECK(aoti_debug_printer_set_option("trap", "1") == 0);
  at::Tensor in = at::ones({3});
  at::Tensor out = at::zeros({3});
  at::Tensor already = at::full({2}, NAN);
  aoti_debug_printer_begin_run();
  aoti_debug_printer_launch_at_level(AOTI_DEBUG_PRINTER_LEVEL_PRINT,
                                     AOTI_DEBUG_PRINTER_BEFORE_LAUNCH, "k", 0);
  CHECK(aoti_debug_printer_tensor(AOTI_DEBUG_PRINTER_LEVEL_PRINT, AOTI_DEBUG_PRINTER_BEFORE_LAUNCH,
                                  "k", "in", handle(in)) == 0);
  CHECK(aoti_debug_printer_tensor(AOTI_DEBUG_PRINTER_LEVEL_PRINT, AOTI_DEBUG_PRINTER_BEFORE_LAUNCH,
                                  "k", "stale", handle(already)) == 0);
  aoti_debug_printer_launch_at_level(AOTI_DEBUG_PRINTER_LEVEL_PRINT,
                                     AOTI_DEBUG_PRINTER_AFTER_LAUNCH, "k", 0);
  // NaN that was there before launch is not this kernel's doing.
  CHECK(aoti_debug_printer_tensor(AOTI_DEBUG_PRINTER_LEVEL_PRINT, AOTI_DEBUG_PRINTER_AFTER_LAUNCH,
                                  "k", "stale", handle(already)) == 0);
  out[1] = INFINITY;
  CHECK(aoti_debug_printer_tensor(AOTI_DEBUG_PRINTER_LEVEL_PRINT, AOTI_DEBUG_PRINTER_AFTER_LAUNCH,
                                  "k", "out", handle(out)) == AOTI_DEBUG_PRINTER_STOPPED_BY_TRAP);
  // The stop's words, for the error the package raises: the kernel, and
  // the repro of the finding noted in the dump.
  const std::string stop = aoti_debug_printer_stop_message();
  CHECK(stop.find("NaN/Inf trap: kernel k (launch 0) made NaN/Inf in out") == 0);
  CHECK(stop.find("; a one-kernel repro: aoti-debug repro ") != std::string::npos);
  CHECK(aoti_debug_printer_tensor(AOTI_DEBUG_PRINTER_LEVEL_PRINT, AOTI_DEBUG_PRINTER_MODEL_INPUT,
                                  "", "arg0",
                                  handle(already)) == AOTI_DEBUG_PRINTER_STOPPED_BY_TRAP);
  CHECK(std::string(aoti_debug_printer_stop_message()) ==
        "NaN/Inf trap: model input arg0 holds NaN/Inf");
  CHECK(aoti_debug_printer_set_option("trap", "0") == 0);
  const std::string text = s.output();
  CHECK(text.find("NaN/Inf TRAP at after_launch k out") != std::string::npos);
  CHECK(text.find("kernel k made NaN/Inf in out") != std::string::npos);
  CHECK(text.find("model input arg0 already holds NaN/Inf") != std::string::npos);
  CHECK(text.find("TRAP at after_launch k stale") == std::string::npos);
  // The kernel's inputs were saved before launch, and the finding is a line
  // of the manifest beside them, for `aoti-debug repro`.
  CHECK(std::distance(fs::directory_iterator(s.dump), fs::directory_iterator()) >= 2);
  const std::string manifest = slurp(s.dump / "manifest.jsonl");
  CHECK(manifest.find("{\"event\": \"trap\", \"phase\": \"after_launch\", \"kernel\": \"k\", "
                      "\"arg\": \"out\"") != std::string::npos);
}

// Kernel k's argument, with its role, recorded at level 2 in `phase`.
int32_t record_held(int32_t phase, const char* arg, int32_t role, at::Tensor& t) {
  return aoti_debug_printer_tensor_held(AOTI_DEBUG_PRINTER_LEVEL_PRINT, phase, "k", arg, "", "",
                                        role, handle(t));
}

// "values=[...]" of kernel k's input `arg`, as the trap record in `text`
// lists it among the kernel's inputs before launch.
std::string trap_input_values(const std::string& text, const std::string& arg) {
  const std::string inputs = text.substr(text.find("the kernel's inputs before launch:"));
  const size_t at = inputs.find("before_launch k " + arg);
  REQUIRE(at != std::string::npos);
  const size_t values = inputs.find("values=", at);
  return inputs.substr(values, inputs.find('\n', values) - values);
}

TEST_CASE(
    "the trap copies an argument the kernel writes before launch, one it only reads where "
    "it fires",
    "[watch]") {
  Scratch s;
  CHECK(aoti_debug_printer_set_option("trap", "1") == 0);
  at::Tensor weight = at::ones({3});
  at::Tensor acc = at::ones({3});
  at::Tensor out = at::zeros({3});
  aoti_debug_printer_begin_run();
  aoti_debug_printer_launch_at_level(AOTI_DEBUG_PRINTER_LEVEL_PRINT,
                                     AOTI_DEBUG_PRINTER_BEFORE_LAUNCH, "k", 0);
  CHECK(record_held(AOTI_DEBUG_PRINTER_BEFORE_LAUNCH, "weight", AOTI_DEBUG_PRINTER_ROLE_READ,
                    weight) == 0);
  CHECK(record_held(AOTI_DEBUG_PRINTER_BEFORE_LAUNCH, "acc", AOTI_DEBUG_PRINTER_ROLE_READ_WRITE,
                    acc) == 0);
  CHECK(record_held(AOTI_DEBUG_PRINTER_BEFORE_LAUNCH, "out", AOTI_DEBUG_PRINTER_ROLE_WRITE, out) ==
        0);
  // The kernel: it doubles acc, as it may, and (against its role) writes
  // weight, which shows when weight's contents were taken.
  acc.mul_(2);
  weight.fill_(3);
  out[0] = NAN;
  aoti_debug_printer_launch_at_level(AOTI_DEBUG_PRINTER_LEVEL_PRINT,
                                     AOTI_DEBUG_PRINTER_AFTER_LAUNCH, "k", 0);
  CHECK(record_held(AOTI_DEBUG_PRINTER_AFTER_LAUNCH, "acc", AOTI_DEBUG_PRINTER_ROLE_READ_WRITE,
                    acc) == 0);
  CHECK(record_held(AOTI_DEBUG_PRINTER_AFTER_LAUNCH, "out", AOTI_DEBUG_PRINTER_ROLE_WRITE, out) !=
        0);
  CHECK(aoti_debug_printer_set_option("trap", "0") == 0);
  const std::string text = s.output();
  const auto values_of = [&](const std::string& arg) { return trap_input_values(text, arg); };
  CHECK(values_of("acc") == "values=[1, 1, 1]");     // copied before launch
  CHECK(values_of("weight") == "values=[3, 3, 3]");  // read where the trap fired
  // Both were saved for the repro, each once.
  CHECK(s.snapshots().size() == 2);
}

TEST_CASE("an argument the kernel reads through memory it also writes is copied before launch",
          "[copy_kept_shared_with_writes]") {
  Scratch s;
  CHECK(aoti_debug_printer_set_option("trap", "1") == 0);
  at::Tensor in = at::ones({4});
  at::Tensor other = at::ones({4});
  // The kernel writes its output into the first half of its input's memory.
  at::Tensor out = in.narrow(0, 0, 2);
  aoti_debug_printer_begin_run();
  aoti_debug_printer_launch_at_level(AOTI_DEBUG_PRINTER_LEVEL_PRINT,
                                     AOTI_DEBUG_PRINTER_BEFORE_LAUNCH, "k", 0);
  CHECK(record_held(AOTI_DEBUG_PRINTER_BEFORE_LAUNCH, "in", AOTI_DEBUG_PRINTER_ROLE_READ, in) == 0);
  CHECK(record_held(AOTI_DEBUG_PRINTER_BEFORE_LAUNCH, "other", AOTI_DEBUG_PRINTER_ROLE_READ,
                    other) == 0);
  CHECK(record_held(AOTI_DEBUG_PRINTER_BEFORE_LAUNCH, "out", AOTI_DEBUG_PRINTER_ROLE_WRITE, out) ==
        0);
  out.fill_(NAN);
  other.fill_(5);  // against its role: shows that `other` was still read late
  aoti_debug_printer_launch_at_level(AOTI_DEBUG_PRINTER_LEVEL_PRINT,
                                     AOTI_DEBUG_PRINTER_AFTER_LAUNCH, "k", 0);
  CHECK(record_held(AOTI_DEBUG_PRINTER_AFTER_LAUNCH, "out", AOTI_DEBUG_PRINTER_ROLE_WRITE, out) !=
        0);
  CHECK(aoti_debug_printer_set_option("trap", "0") == 0);
  const std::string text = s.output();
  const auto values_of = [&](const std::string& arg) { return trap_input_values(text, arg); };
  CHECK(values_of("in") == "values=[1, 1, 1, 1]");  // as it was before the kernel wrote out
  CHECK(values_of("other") == "values=[5, 5, 5, 5]");
}

TEST_CASE("a model input is checked against what its package was compiled for",
          "[aoti_debug_printer_check_input]") {
  Scratch s;
  const int32_t L = AOTI_DEBUG_PRINTER_LEVEL_PRINT;
  auto check = [&](const char* name, const char* compiled_for, at::Tensor t) {
    return aoti_debug_printer_check_input(L, "arg", name, compiled_for, handle(t));
  };
  aoti_debug_printer_begin_run();
  // What was compiled for, in every form the grammar has: no finding.
  at::Tensor x = at::zeros({4, 64, 16});
  CHECK(check("x", "float32 cpu [4,64(8..512),16] [1024,16,1]", x) == 0);
  at::Tensor y = at::zeros({7, 5});
  CHECK(check("y", "float32 cpu [s1:2..,5] [5,1]", y) == 0);
  at::Tensor z = at::zeros({7, 3});
  CHECK(check("z", "float32 cpu [s1:2..,?:0..] [?,1]", z) == 0);
  // A dim of size 1 has any stride; a tensor of no elements any layout.
  at::Tensor one = at::zeros({4, 16}).unsqueeze(1).expand({4, 1, 16});
  CHECK(check("one", "float32 cpu [4,1,16] [16,16,1]", one) == 0);
  CHECK(check("none", "float32 cpu [0,3] [3,1]", at::zeros({3, 0}).t()) == 0);
  CHECK(s.output().empty());

  struct Case {
    const char* compiled_for;
    at::Tensor given;
    const char* says;
  };
  const std::vector<Case> wrong = {
      {"float32 cpu [4,64(8..512),16] [?,16,1]", at::zeros({4, 200, 16}),
       "dim 1 is 200 (shape [4, 200, 16]), but this package was compiled for 64 only; the "
       "exported program allows 8..512"},
      {"float32 cpu [s1:8..512] [1]", at::zeros({600}), "accepts 8..512"},
      {"float32 cpu [s1:2..,5] [5,1]", at::zeros({6, 5}),
       "takes it equal to input y dim 0, which is 7"},
      {"float32 cpu [4,3] [3,1]", at::zeros({3, 4}).t(), "has stride 1 in dim 0"},
      {"float32 cpu [4,3] [3,1]", at::zeros({4, 3}, at::kDouble), "is float64, but"},
      {"float32 cpu [4,3] [3,1]", at::zeros({12}),
       "has 1 dims, but this package was compiled for 2"},
  };
  for (const Case& c : wrong) {
    Scratch t;
    CHECK(aoti_debug_printer_check_input(L, "arg0_1", "w", c.compiled_for,
                                         handle(const_cast<at::Tensor&>(c.given))) ==
          AOTI_DEBUG_PRINTER_STOPPED_BY_INPUT_CHECK);
    INFO(t.output());
    CHECK(t.output().find("WRONG INPUT at model_input arg0_1: model input w ") !=
          std::string::npos);
    CHECK(t.output().find(c.says) != std::string::npos);
  }

  // continue: the finding, in JSON, and the run goes on; off: nothing.
  Scratch j;
  CHECK(aoti_debug_printer_set_option("format", "jsonl") == 0);
  CHECK(aoti_debug_printer_set_option("input_check", "continue") == 0);
  at::Tensor big = at::zeros({4, 200, 16});
  CHECK(check("x", "float32 cpu [4,64(8..512),16] [?,16,1]", big) == 0);
  CHECK(j.output().find("{\"event\": \"wrong_input\", \"phase\": \"model_input\", \"kernel\": "
                        "\"\", \"arg\": \"arg\"") != std::string::npos);
  CHECK(j.output().find("\"kind\": \"size\", \"dim\": 1, \"given\": \"200\", \"compiled_for\": "
                        "\"64\"") != std::string::npos);
  const size_t before = j.output().size();
  CHECK(aoti_debug_printer_set_option("input_check", "off") == 0);
  CHECK(check("x", "float32 cpu [4,64,16] [?,16,1]", big) == 0);
  CHECK(j.output().size() == before);
  CHECK(aoti_debug_printer_set_option("input_check", "stop") == 0);
  CHECK(aoti_debug_printer_set_option("input_check", "maybe") != 0);

  // A text the library cannot read is reported (on stderr) and stops nothing.
  CHECK(check("x", "float32 cpu [4,,16]", big) == 0);
  CHECK(j.output().size() == before);
  // A null handle is the record's to report, not the check's.
  CHECK(aoti_debug_printer_check_input(L, "arg", "x", "float32 cpu [4] [1]", nullptr) == 0);
}

TEST_CASE("a finding says where the user's code made its node, a run's table only in that run",
          "[aoti_debug_printer_sources]") {
  Scratch s;
  CHECK(aoti_debug_printer_set_option("trap", "1") == 0);
  at::Tensor in = at::ones({3});
  at::Tensor out = at::full({3}, NAN);
  // Two nodes, the second a prefix of nothing and with two frames; a name
  // that is a prefix of another must not match it.
  const char* table =
      "mul_1\tmodel.py:9 in forward: return y * 2\n"
      "mul\tmodel.py:7 in forward: y = x * x\tmain.py:3 in <module>: m(x)\n";
  const auto trap = [&](const char* node) {
    aoti_debug_printer_launch_at_level(AOTI_DEBUG_PRINTER_LEVEL_PRINT,
                                       AOTI_DEBUG_PRINTER_BEFORE_LAUNCH, "k", 0);
    aoti_debug_printer_tensor_held(AOTI_DEBUG_PRINTER_LEVEL_PRINT, AOTI_DEBUG_PRINTER_BEFORE_LAUNCH,
                                   "k", "in", "", "", AOTI_DEBUG_PRINTER_ROLE_READ, handle(in));
    aoti_debug_printer_launch_at_level(AOTI_DEBUG_PRINTER_LEVEL_PRINT,
                                       AOTI_DEBUG_PRINTER_AFTER_LAUNCH, "k", 0);
    return aoti_debug_printer_tensor_held(AOTI_DEBUG_PRINTER_LEVEL_PRINT,
                                          AOTI_DEBUG_PRINTER_AFTER_LAUNCH, "k", "out", node, "",
                                          AOTI_DEBUG_PRINTER_ROLE_WRITE, handle(out));
  };
  aoti_debug_printer_begin_run();
  aoti_debug_printer_sources(table);
  CHECK(trap("mul") != 0);
  // A run without a table (a package compiled before ABI 9) finds none.
  aoti_debug_printer_begin_run();
  CHECK(trap("mul") != 0);
  CHECK(aoti_debug_printer_set_option("trap", "0") == 0);
  const std::string text = s.output();
  const size_t first = text.find("NaN/Inf TRAP at after_launch k out");
  REQUIRE(first != std::string::npos);
  CHECK(text.find("\n    at model.py:7 in forward: y = x * x\n", first) != std::string::npos);
  CHECK(text.find("    at ", text.find("NaN/Inf TRAP", first + 1)) == std::string::npos);
  const std::string manifest = slurp(s.dump / "manifest.jsonl");
  CHECK(manifest.find("\"node\": \"mul\", \"role\": \"write\", \"why\": \"\", \"pid\"") !=
        std::string::npos);
  CHECK(manifest.find("\"source\": [\"model.py:7 in forward: y = x * x\", "
                      "\"main.py:3 in <module>: m(x)\"]") != std::string::npos);
  CHECK(std::count(manifest.begin(), manifest.end(), '\n') >= 2);
  CHECK(manifest.find("\"source\"", manifest.find("\"source\"") + 1) == std::string::npos);
}

TEST_CASE("a record a captured graph's replay wrote says which replay, others do not",
          "[format_record]") {
  using namespace aoti_debug_printer;
  Where w;
  w.phase = Phase::AfterLaunch;
  w.kernel = "triton_poi_fused_sqrt_0";
  w.arg = "out_ptr0";
  w.run = 2;
  w.launch = 1;
  w.call = 0;
  const at::Tensor t = at::arange(4, at::kFloat);
  const TensorRecord outside = describe(w, t, host_contents(t, 0));
  CHECK(format_text(outside).find("(run 2, launch 1, call 0)") != std::string::npos);
  CHECK(format_json(outside).find("\"replay\"") == std::string::npos);
  w.replay = 3;
  const TensorRecord replayed = describe(w, t, host_contents(t, 0));
  CHECK(format_text(replayed).find("(run 2, launch 1, call 0, replay 3)") != std::string::npos);
  CHECK(format_json(replayed).find("\"replay\": 3") != std::string::npos);
  CHECK(format_launch(w, false).find("replay 3)") != std::string::npos);
  CHECK(format_scalar(w, "int64", "7", true).find("\"replay\": 3") != std::string::npos);
}

namespace {
// A record of `t` at `phase` of kernel "k" (launch 0), as a captured run
// holds it, its statistics already known.
aoti_debug_printer::TensorRecord captured_record(aoti_debug_printer::Phase phase,
                                                 const std::string& arg, const at::Tensor& t) {
  using namespace aoti_debug_printer;
  Where w;
  w.phase = phase;
  w.kernel = phase == Phase::ModelInput ? "" : "k";
  w.arg = arg;
  w.run = 5;
  w.launch = phase == Phase::ModelInput ? -1 : 0;
  w.call = phase == Phase::ModelInput ? -1 : 0;
  return describe(w, t, host_contents(t, 64));
}
}  // namespace

TEST_CASE("a captured run writes all its records at each replay, with the replay's index",
          "[Capture::write_replay]") {
  using namespace aoti_debug_printer;
  Scratch s;
  REQUIRE(aoti_debug_printer_set_option("format", "jsonl") == 0);  // a line a record
  graphs::Capture capture(settings_now());
  const at::Tensor x = at::arange(3, at::kFloat);
  capture.add(captured_record(Phase::ModelInput, "arg0", x), nullptr);
  Where launch = captured_record(Phase::BeforeLaunch, "", x).where;
  capture.add_launch(launch);
  capture.add_scalar(launch, "int64", "7");
  capture.add(captured_record(Phase::AfterLaunch, "out", x * 2), nullptr);
  capture.write_replay();
  capture.write_replay();
  // The host call only takes the statistics: the writer thread writes the
  // records, with no flush from this thread, and wait_for_replays returns
  // once it has.
  graphs::wait_for_replays();
  std::istringstream lines(s.output());
  std::vector<std::string> got;
  for (std::string line; std::getline(lines, line);) got.push_back(line);
  REQUIRE(got.size() == 8);
  for (size_t i = 0; i < got.size(); ++i) {
    CHECK(got[i].find("\"replay\": " + std::to_string(i / 4) + ",") != std::string::npos);
    // The same records, in the same order, at each replay.
    if (i >= 4) CHECK(got[i].substr(0, 40) == got[i - 4].substr(0, 40));
  }
  CHECK(got[3].find("\"phase\": \"after_launch\", \"kernel\": \"k\", \"arg\": \"out\"") !=
        std::string::npos);
  CHECK(graphs::take_stop().empty());
}

TEST_CASE("replays the writer has not written yet are bounded, and none is dropped",
          "[Capture::write_replay]") {
  using namespace aoti_debug_printer;
  Scratch s;
  REQUIRE(aoti_debug_printer_set_option("format", "jsonl") == 0);
  graphs::Capture capture(settings_now());
  capture.add(captured_record(Phase::AfterLaunch, "out", at::arange(4, at::kFloat)), nullptr);
  const int64_t replays = 3 * graphs::Capture::kMostUnwritten + 5;
  for (int64_t i = 0; i < replays; ++i) capture.write_replay();
  flush_records();
  std::istringstream lines(s.output());
  int64_t next = 0;
  for (std::string line; std::getline(lines, line); ++next)
    CHECK(line.find("\"replay\": " + std::to_string(next) + ",") != std::string::npos);
  CHECK(next == replays);  // every replay, once, in order
}

TEST_CASE("the trap at a captured run's replay names the kernel once, and the next run stops",
          "[Capture::write_replay]") {
  using namespace aoti_debug_printer;
  Scratch s;
  REQUIRE(aoti_debug_printer_set_option("trap", "1") == 0);
  graphs::Capture capture(settings_now());
  REQUIRE(aoti_debug_printer_set_option("trap", "0") == 0);
  const at::Tensor stale = at::full({2}, NAN);
  at::Tensor out = at::zeros({3});
  out[1] = INFINITY;
  capture.add(captured_record(Phase::BeforeLaunch, "stale", stale), nullptr);
  // NaN that was there before launch is not this kernel's doing.
  capture.add(captured_record(Phase::AfterLaunch, "stale", stale), nullptr);
  capture.add(captured_record(Phase::AfterLaunch, "out", out), nullptr);
  capture.add(captured_record(Phase::AfterLaunch, "later", out), nullptr);
  capture.write_replay();
  capture.write_replay();  // stopped: writes nothing
  const std::string text = s.output();
  CHECK(text.find("NaN/Inf TRAP at after_launch k out") != std::string::npos);
  CHECK(text.find("kernel k made NaN/Inf in out") != std::string::npos);
  CHECK(text.find("TRAP at after_launch k stale") == std::string::npos);
  // The trap's record ends the replay's records: none of `later`, none of
  // a second replay.
  CHECK(text.find("k later") == std::string::npos);
  CHECK(text.find("replay 1") == std::string::npos);
  const std::string manifest = slurp(s.dump / "manifest.jsonl");
  CHECK(manifest.find("\"event\": \"trap\"") != std::string::npos);
  CHECK(manifest.find("\"replay\": 0") != std::string::npos);
  // What the next run outside the graph stops with, once.
  const std::string stop = graphs::take_stop();
  CHECK(stop.find("kernel k (launch 0) made NaN/Inf in out at replay 0 of a captured CUDA graph") !=
        std::string::npos);
  CHECK(graphs::take_stop().empty());
}

TEST_CASE("level 1 in a captured run saves each replay's copy, with the replay's index",
          "[Capture::write_replay]") {
  using namespace aoti_debug_printer;
  Scratch s;
  graphs::Capture capture(settings_now());
  const at::Tensor t = at::arange(4, at::kFloat);
  // Where the graph's copy lands at each replay (pinned memory on a GPU).
  const auto bytes = static_cast<int64_t>(t.nbytes());
  const std::shared_ptr<void> landed(std::malloc(bytes), std::free);
  std::memcpy(landed.get(), t.const_data_ptr(), bytes);
  Where launch = captured_record(Phase::AfterLaunch, "", t).where;
  capture.add_saved(captured_record(Phase::BeforeLaunch, "unwritten", t), std::nullopt);
  capture.add_saved(captured_record(Phase::AfterLaunch, "out", t),
                    device::CapturedCopy{landed, bytes});
  capture.add_scalar(launch, "int64", "7", true);
  capture.write_replay();
  // The host call copied replay 0's: the next replay's copy changes nothing of it.
  std::memcpy(landed.get(), (t * 10).const_data_ptr(), bytes);
  capture.write_replay();
  graphs::wait_for_replays();
  CHECK(s.output().empty());  // level 1 writes to the dump only
  std::istringstream lines(slurp(s.dump / "manifest.jsonl"));
  std::vector<std::string> got;
  for (std::string line; std::getline(lines, line);)
    if (line.find("\"event\": \"environment\"") == std::string::npos) got.push_back(line);
  REQUIRE(got.size() == 6);
  for (size_t i = 0; i < got.size(); ++i)
    CHECK(got[i].find("\"replay\": " + std::to_string(i / 3) + ",") != std::string::npos);
  CHECK(got[0].find("\"file\"") == std::string::npos);
  CHECK(got[1].find("\"file\": \"") != std::string::npos);
  CHECK(got[1].find("\"max\": 3,") != std::string::npos);
  CHECK(got[4].find("\"max\": 30,") != std::string::npos);
  CHECK(got[2].find("\"value\": \"7\"") != std::string::npos);
  // Each replay's snapshot is a file of its own.
  int64_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(s.dump))
    files += e.path().extension() == ".pt";
  CHECK(files == 2);
}

namespace {
// A captured run's replay whose kernel k made NaN in `out`, with the trap on
// at capture: the next run outside the graph has a stop waiting.
void replay_that_traps() {
  using namespace aoti_debug_printer;
  REQUIRE(aoti_debug_printer_set_option("trap", "1") == 0);
  graphs::Capture capture(settings_now());
  REQUIRE(aoti_debug_printer_set_option("trap", "0") == 0);
  capture.add(captured_record(Phase::AfterLaunch, "out", at::full({2}, NAN)), nullptr);
  capture.write_replay();
  graphs::wait_for_replays();
}
}  // namespace

TEST_CASE("a run outside the graph stops once for the trap a replay fired",
          "[stop_for_an_earlier_replay]") {
  using namespace aoti_debug_printer;
  Scratch s;
  CHECK(stop_for_an_earlier_replay().code == 0);  // none pending
  replay_that_traps();
  // The JIT wrapper's next call raises with it, at its begin_run.
  const Stop stop = stop_for_an_earlier_replay();
  CHECK(stop.code == AOTI_DEBUG_PRINTER_STOPPED_BY_EARLIER_REPLAY);
  CHECK(stop.message.find("stopped for an earlier replay of a captured CUDA graph: NaN/Inf trap: "
                          "kernel k (launch 0) made NaN/Inf in out at replay 0") == 0);
  CHECK(stop.message.find("infinities only") == std::string::npos);  // NaN: nothing to add
  CHECK(stop_for_an_earlier_replay().code == 0);                     // once
}

namespace {
// What the header's launch event throws, where it throws.
std::string thrown_by_launch(const aoti_debug_printer_api* api, const char* kernel) {
  try {
    aoti_debug_printer::launch(api, AOTI_DEBUG_PRINTER_LEVEL_PRINT,
                               AOTI_DEBUG_PRINTER_BEFORE_LAUNCH, kernel, 0);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("the run after a replay's trap ends with the stop's own words, and blames no kernel",
          "[aoti_debug_printer_stop_message]") {
  Scratch s;
  replay_that_traps();
  const aoti_debug_printer_api* api = aoti_debug_printer_get_api(AOTI_DEBUG_PRINTER_ABI_VERSION);
  REQUIRE(api != nullptr);
  // The package's next run outside the graph: its first launch event is an
  // extern kernel's, which did nothing wrong.
  aoti_debug_printer_begin_run_with_end();
  const std::string error = thrown_by_launch(api, "aoti_torch_cpu_mm_out");
  aoti_debug_printer_end_run();
  CHECK(error == std::string("aoti-debug-printer: ") + aoti_debug_printer_stop_message());
  CHECK(error.find("aoti-debug-printer: stopped for an earlier replay of a captured CUDA graph: "
                   "NaN/Inf trap: kernel k (launch 0) made NaN/Inf in out at replay 0") == 0);
  CHECK(error.find("CUDA error") == std::string::npos);
  CHECK(error.find("mm_out") == std::string::npos);
  // Reported once on the output's user line (stderr) is not asserted here;
  // the stop is taken once: the run after goes on.
  aoti_debug_printer_begin_run_with_end();
  CHECK(thrown_by_launch(api, "aoti_torch_cpu_mm_out").empty());
  aoti_debug_printer_end_run();
}

namespace {
// Host memory a captured level-1 copy lands in at each replay (pinned memory
// on a GPU): the test writes what each replay's copy holds.
struct Landed {
  int64_t bytes;
  std::shared_ptr<void> memory;
  explicit Landed(const at::Tensor& t)
      : bytes(static_cast<int64_t>(t.nbytes())), memory(std::malloc(bytes), std::free) {
    set(t);
  }
  void set(const at::Tensor& t) { std::memcpy(memory.get(), t.const_data_ptr(), bytes); }
  aoti_debug_printer::device::CapturedCopy copy() const { return {memory, bytes}; }
};

// The lines of `text` that hold `needle`.
std::vector<std::string> lines_with(const std::string& text, const std::string& needle) {
  std::istringstream lines(text);
  std::vector<std::string> got;
  for (std::string line; std::getline(lines, line);)
    if (line.find(needle) != std::string::npos) got.push_back(line);
  return got;
}
}  // namespace

TEST_CASE("the guard at a captured run's replay names the kernel at the replay that wrote, once",
          "[Capture::write_replay]") {
  using namespace aoti_debug_printer;
  Scratch s;
  REQUIRE(aoti_debug_printer_set_option("format", "jsonl") == 0);
  graphs::Capture capture(settings_now());
  // Kernel k only reads x: its fingerprint before launch (the record's copy)
  // and after (the guard's pass of its own) must be equal at each replay.
  const at::Tensor x = at::arange(4, at::kFloat);
  Landed before(x), out(x), after(x);
  TensorRecord read = captured_record(Phase::BeforeLaunch, "x", x);
  read.where.role = Role::Read;
  const size_t first = capture.add_saved(read, before.copy());
  capture.add_saved(captured_record(Phase::AfterLaunch, "out", x), out.copy());
  TensorRecord read_after = captured_record(Phase::AfterLaunch, "x", x);
  read_after.where.role = Role::Read;
  const size_t second = capture.add_saved(read_after, after.copy());
  GuardFinding f;
  f.where = read_after.where;
  f.kind = "read_only_argument_changed";
  f.numel = x.numel();
  f.culprit = "k (launch 0)";
  f.message = "kernel k (launch 0) changed x, an argument it only reads";
  capture.add_check(first, second, guard::at_replay(f));
  for (int replay = 0; replay < 10; ++replay) {
    after.set(replay == 6 ? x + 1 : x);
    capture.write_replay();
  }
  graphs::wait_for_replays();
  // Named at replay 6, once, with the guard's record: what a replay cannot
  // tell (how many elements changed, copies saved) is not said.
  const std::vector<std::string> found = lines_with(s.output(), "\"event\": \"guard\"");
  REQUIRE(found.size() == 1);
  CHECK(found[0].find("\"replay\": 6,") != std::string::npos);
  CHECK(found[0].find("\"kind\": \"read_only_argument_changed\"") != std::string::npos);
  CHECK(found[0].find("\"changed\": -1, \"first_index\": -1") != std::string::npos);
  CHECK(found[0].find("\"files\": {}") != std::string::npos);
  // Noted in the dump for a repro, as outside graphs; replay 6's records
  // come before it, and no later replay writes any.
  const std::string manifest = slurp(s.dump / "manifest.jsonl");
  const std::vector<std::string> noted = lines_with(manifest, "\"event\": \"guard\"");
  REQUIRE(noted.size() == 1);
  CHECK(noted[0].find("\"replay\": 6,") != std::string::npos);
  CHECK(lines_with(manifest, "\"replay\": 6,").size() == 4);  // three records and the finding
  CHECK(lines_with(manifest, "\"replay\": 7,").empty());
  CHECK(lines_with(manifest, "\"replay\": 9,").empty());
  // What the next run outside the graph stops with, once.
  const std::string stop = graphs::take_stop();
  CHECK(stop.find("write guard at replay 6 of a captured CUDA graph: kernel k (launch 0) changed "
                  "x, an argument it only reads; a one-kernel repro: aoti-debug repro ") == 0);
  CHECK(stop.find("this graph's later replays write no records") != std::string::npos);
  CHECK(graphs::take_stop().empty());
}

TEST_CASE("the guard at a captured run's replay finds nothing where the fingerprints stay equal",
          "[Capture::write_replay]") {
  using namespace aoti_debug_printer;
  Scratch s;
  graphs::Capture capture(settings_now());
  // A model input and its reader's record, their statistics (and the
  // fingerprint of each replay) known.
  const at::Tensor b = at::arange(3, at::kFloat);
  TensorRecord given = captured_record(Phase::ModelInput, "b", b);
  TensorRecord read = captured_record(Phase::BeforeLaunch, "b", b);
  given.stats.fingerprint = read.stats.fingerprint = 42;
  GuardFinding f;
  f.where = read.where;
  f.kind = "overwritten_before_read";
  f.numel = b.numel();
  f.writer = "the caller (model input b)";
  f.message =
      "b changed after the caller (model input b) wrote it and before k (launch 0) read "
      "it: a kernel launched between wrote over it";
  const size_t first = capture.add(given, nullptr);
  capture.add_check(first, capture.add(read, nullptr), guard::at_replay(f));
  for (int replay = 0; replay < 10; ++replay) capture.write_replay();
  graphs::wait_for_replays();
  CHECK(s.output().find("WRITE GUARD") == std::string::npos);
  CHECK(lines_with(s.output(), "replay 9)").size() == 2);  // every replay, written
  CHECK(graphs::take_stop().empty());

  // The same check, the reader's fingerprint another: named at the first
  // replay, in the guard's text, with nothing it cannot know.
  graphs::Capture differing(settings_now());
  read.stats.fingerprint = 43;
  const size_t given_at = differing.add(given, nullptr);
  differing.add_check(given_at, differing.add(read, nullptr), guard::at_replay(f));
  differing.write_replay();
  differing.write_replay();
  graphs::wait_for_replays();
  const std::string text = s.output();
  CHECK(text.find("WRITE GUARD at before_launch k b: b changed after the caller (model input b) "
                  "wrote it") != std::string::npos);
  CHECK(
      text.find("a kernel launched between wrote over it (run 5, launch 0, call 0, replay 0)\n") !=
      std::string::npos);
  CHECK(text.find("elements changed") == std::string::npos);
  CHECK(text.find("saved as") == std::string::npos);
  CHECK(text.find("changed by: not known") != std::string::npos);
  CHECK(lines_with(text, "WRITE GUARD").size() == 1);
  const Stop stop = stop_for_an_earlier_replay();
  CHECK(stop.code == AOTI_DEBUG_PRINTER_STOPPED_BY_EARLIER_REPLAY);
  CHECK(stop.message.find("stopped for an earlier replay of a captured CUDA graph: write guard "
                          "at replay 0 of a captured CUDA graph: b changed after") == 0);
  CHECK(stop_for_an_earlier_replay().code == 0);
}

TEST_CASE("a library older than ABI 11 stops a launch event for a CUDA error only", "[stop_text]") {
  // Its table ends before stop_message, and its launch events said 1.
  aoti_debug_printer_api old = *aoti_debug_printer_get_api(AOTI_DEBUG_PRINTER_ABI_VERSION);
  old.size = offsetof(aoti_debug_printer_api, stop_message);
  old.launch_at_level = [](int32_t, int32_t, const char*, int32_t) -> int32_t { return 1; };
  CHECK(thrown_by_launch(&old, "triton_poi_0") ==
        "aoti-debug-printer: CUDA error at kernel triton_poi_0; its record is above");
  // A tensor record's code still says which stop it was.
  CHECK(aoti_debug_printer::stop_text(&old, AOTI_DEBUG_PRINTER_STOPPED_BY_GUARD, "k", "x") ==
        "aoti-debug-printer: write guard at k x; its record is above");
}

TEST_CASE("a trap on infinities only says how to trap NaN only, and =nan does not fire",
          "[trap::check]") {
  using namespace aoti_debug_printer;
  Scratch s;
  at::Tensor mask = at::zeros({3});
  mask[2] = -INFINITY;
  const TensorRecord r = captured_record(Phase::AfterLaunch, "mask", mask);
  std::vector<WatchedArg> watched;
  REQUIRE(aoti_debug_printer_set_option("trap", "1") == 0);
  const std::optional<Finding> found = trap::check(settings_now(), r.where, r.stats, watched);
  REQUIRE(found);
  CHECK(found->message.find(
            "made NaN/Inf in mask (infinities only; where they are meant, as an attention "
            "mask's -inf, AOTI_DEBUG_PRINTER_TRAP=nan traps NaN only)") != std::string::npos);
  REQUIRE(aoti_debug_printer_set_option("trap", "nan") == 0);
  CHECK(get_option("trap") == "nan");
  CHECK(!trap::check(settings_now(), r.where, r.stats, watched));
  at::Tensor nan = mask.clone();
  nan[0] = NAN;
  CHECK(trap::check(settings_now(), r.where, host_contents(nan, 0).stats, watched));
}

TEST_CASE("a record whose workspace holds no kernel's statistics reads its tensor",
          "[aoti_debug_printer_tensor_stored][aoti_debug_printer_statistics_workspace]") {
  // Only a CUDA workspace of int64 slots, or this thread's CPU workspace
  // (cpu_statistics), holds statistics a kernel kept; any other (this CPU
  // one, one of floats, none) leaves the record to read its tensor, exactly
  // as tensor_computed's does, and switches nothing on.
  const aoti_debug_printer_api* api = aoti_debug_printer_get_api(AOTI_DEBUG_PRINTER_ABI_VERSION);
  REQUIRE(api != nullptr);
  Scratch s;
  at::Tensor t = at::arange(100, at::kFloat).sub_(30);
  at::Tensor slots = at::zeros({2 * AOTI_DEBUG_PRINTER_STORED_SLOT}, at::kLong);
  at::Tensor floats = at::zeros({2 * AOTI_DEBUG_PRINTER_STORED_SLOT}, at::kFloat);
  {
    aoti_debug_printer::Run run(api);
    aoti_debug_printer::statistics_workspace(api, handle(slots));
    aoti_debug_printer::statistics_workspace(api, nullptr);
    aoti_debug_printer::launch(api, AOTI_DEBUG_PRINTER_LEVEL_PRINT, AOTI_DEBUG_PRINTER_AFTER_LAUNCH,
                               "k", 0);
    aoti_debug_printer::value(api, AOTI_DEBUG_PRINTER_LEVEL_PRINT, AOTI_DEBUG_PRINTER_AFTER_LAUNCH,
                              "k", "read", handle(t));
    aoti_debug_printer::value_stored(api, AOTI_DEBUG_PRINTER_LEVEL_PRINT,
                                     AOTI_DEBUG_PRINTER_AFTER_LAUNCH, "k", "cpu", handle(t),
                                     handle(slots), AOTI_DEBUG_PRINTER_STORED_SLOT);
    aoti_debug_printer::value_stored(api, AOTI_DEBUG_PRINTER_LEVEL_PRINT,
                                     AOTI_DEBUG_PRINTER_AFTER_LAUNCH, "k", "floats", handle(t),
                                     handle(floats), AOTI_DEBUG_PRINTER_STORED_SLOT);
    aoti_debug_printer::value_stored(api, AOTI_DEBUG_PRINTER_LEVEL_PRINT,
                                     AOTI_DEBUG_PRINTER_AFTER_LAUNCH, "k", "none", handle(t),
                                     nullptr, -5);
  }
  const std::string out = s.output();
  // Each record's statistics, the line after its header.
  const auto stats_of = [&](const std::string& arg) {
    const size_t at = out.find("k " + arg + " ");
    REQUIRE(at != std::string::npos);
    const size_t from = out.find('\n', out.find('\n', at) + 1) + 1;
    return out.substr(from, out.find('\n', from) - from);
  };
  CHECK(field(stats_of("read"), "min") == "-30");
  CHECK(field(stats_of("read"), "max") == "69");
  for (const char* arg : {"cpu", "floats", "none"}) CHECK(stats_of(arg) == stats_of("read"));
  CHECK(slots.eq(0).all().item<bool>());
  CHECK(floats.eq(0).all().item<bool>());
}

TEST_CASE(
    "what C++ kernels keep in this thread's CPU workspace prints as a read of the tensor",
    "[aoti_debug_printer_keep_cpu_statistics][aoti_debug_printer_cpu_statistics][KeptStats]") {
  // Two threads' shares of one store, merged into the kernel's slot as the
  // generated code does (inductor/kept_cpp.py): vectors of 8 lanes, a tail
  // of fewer, scalars, NaN, infinities, zeros; the record that takes the
  // slot prints what the record that reads the tensor prints.
  const aoti_debug_printer_api* api = aoti_debug_printer_get_api(AOTI_DEBUG_PRINTER_ABI_VERSION);
  REQUIRE(api != nullptr);
  Scratch s;
  REQUIRE(aoti_debug_printer_set_option("trap", "0") == 0);  // the NaN is planted
  at::Tensor t = at::arange(203, at::kFloat).sub_(60).mul_(0.37f);
  t[3] = NAN;
  t[150] = INFINITY;
  t[151] = -INFINITY;
  t[60] = 0.0f;
  const float* v = t.const_data_ptr<float>();
  int64_t* slots = nullptr;
  {
    aoti_debug_printer::Run run(api);
    slots = aoti_debug_printer::keep_cpu_statistics(api, AOTI_DEBUG_PRINTER_STORED_SLOT,
                                                    AOTI_DEBUG_PRINTER_STORED_SLOT);
    REQUIRE(slots != nullptr);
    aoti_debug_printer::Kept<1> first, second;
    using Vec = at::vec::Vectorized<float>;
    for (int64_t i = 0; i < 96; i += Vec::size())
      first[0].add_vector(Vec::loadu(v + i), Vec::size());
    for (int64_t i = 96; i < 100; ++i) first[0].add(v[i]);
    int64_t i = 100;
    for (; i + Vec::size() <= 200; i += Vec::size())
      second[0].add_vector(Vec::loadu(v + i), Vec::size());
    for (; i < 200; ++i) second[0].add(v[i]);
    second[0].add_vector(Vec::loadu(v + 200, 3), 3);
    second.merge_into(slots);
    first.merge_into(slots);
    const AtenTensorHandle workspace = aoti_debug_printer::cpu_statistics(api);
    aoti_debug_printer::launch(api, AOTI_DEBUG_PRINTER_LEVEL_PRINT, AOTI_DEBUG_PRINTER_AFTER_LAUNCH,
                               "k", 0);
    aoti_debug_printer::value(api, AOTI_DEBUG_PRINTER_LEVEL_PRINT, AOTI_DEBUG_PRINTER_AFTER_LAUNCH,
                              "k", "read", handle(t));
    aoti_debug_printer::value_stored(api, AOTI_DEBUG_PRINTER_LEVEL_PRINT,
                                     AOTI_DEBUG_PRINTER_AFTER_LAUNCH, "k", "kept", handle(t),
                                     workspace, AOTI_DEBUG_PRINTER_STORED_SLOT);
  }
  const std::string out = s.output();
  const auto stats_of = [&](const std::string& arg) {
    const size_t at = out.find("k " + arg + " ");
    REQUIRE(at != std::string::npos);
    const size_t from = out.find('\n', out.find('\n', at) + 1) + 1;
    return out.substr(from, out.find('\n', from) - from);
  };
  // The slot, which the run leaves to the thread, holds the planted counts.
  CHECK(slots[AOTI_DEBUG_PRINTER_STORED_NAN] == 1);
  CHECK(slots[AOTI_DEBUG_PRINTER_STORED_POS_INF] == 1);
  CHECK(slots[AOTI_DEBUG_PRINTER_STORED_NEG_INF] == 1);
  CHECK(slots[AOTI_DEBUG_PRINTER_STORED_FINITE] == 200);
  CHECK(stats_of("kept") == stats_of("read"));
}
