// torch.save checkpoints (pytorch_model.bin): files torch itself wrote
// (scripts/make_torch_bin_fixtures.py), read against what torch and transformers read from them.
// The checkpoint directories hold the weights of make_fixtures.py's opt, gpt2 and qwen2 fixtures,
// so brigade must give those fixtures' transformers logits; torch_bin_misc's dtypes.bin holds one
// tensor per storage type with the values torch reads back (values.json).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "cpu/cpu_backend.h"
#include "hf_fixture.h"
#include "models/checkpoint.h"
#include "models/torch_checkpoint.h"
#include "models/zip_archive.h"

namespace brigade {
namespace {

using testing::fixture_dir;
using testing::kLogitTol;
using testing::load_or_fail;
using testing::read_bytes;
using testing::read_fixture_cases;
using testing::run_fixture_case;
using testing::TempDir;
using testing::write_bytes;

namespace fs = std::filesystem;

std::unique_ptr<Checkpoint> open_or_fail(const std::string& path) {
  auto ck = Checkpoint::open(path);
  EXPECT_TRUE(ck.has_value()) << ck.status().to_string();
  return ck ? std::move(*ck) : nullptr;
}

// The tensors view `mapped` (kept here while the test reads them) and `derived`.
Status read_file(const std::string& path, std::map<std::string, RawTensor>& out, std::vector<std::vector<uint8_t>>& derived) {
  static std::vector<std::shared_ptr<MappedFile>> mapped;
  auto file = MappedFile::open(path);
  if (!file) return file.status();
  mapped.push_back(*file);
  return read_torch_checkpoint(*file, out, derived);
}

void expect_error(const Status& st, StatusCode code, const std::string& needle) {
  EXPECT_EQ(st.code(), code) << st.to_string();
  EXPECT_NE(st.message().find(needle), std::string::npos) << st.to_string();
}

// {torch.save directory, the make_fixtures.py fixture whose weights it holds}
struct BinCase {
  const char* bin;
  const char* source;
};
constexpr BinCase kBinCases[] = {{"opt_bin", "opt"}, {"gpt2_bin_legacy", "gpt2"}, {"qwen2_bin_sharded", "qwen2"}};

class TorchBinFixture : public ::testing::TestWithParam<BinCase> {};

TEST_P(TorchBinFixture, HoldsTheSourceFixturesTensors) {
  auto bin = open_or_fail(fixture_dir(GetParam().bin));
  auto st = open_or_fail(fixture_dir(GetParam().source));
  ASSERT_TRUE(bin && st);
  EXPECT_EQ(bin->format(), "pytorch");
  for (const auto& [name, want] : st->tensors()) {
    SCOPED_TRACE(name);
    auto got = bin->tensor(name);
    ASSERT_TRUE(got.has_value()) << got.status().to_string();
    EXPECT_EQ(got->shape, want.shape);
    EXPECT_EQ(got->dtype, want.dtype);
    ASSERT_EQ(got->bytes.size(), want.bytes.size());
    EXPECT_EQ(std::memcmp(got->bytes.data(), want.bytes.data(), want.bytes.size()), 0);
  }
}

TEST_P(TorchBinFixture, LogitsAndGreedyMatchTransformers) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = load_or_fail(fixture_dir(GetParam().bin), *backend);
  ASSERT_NE(model, nullptr);
  const auto cases = read_fixture_cases(GetParam().source);
  ASSERT_FALSE(cases.empty());
  for (const auto& fc : cases) {
    const auto run = run_fixture_case(*model, *backend, fc);
    EXPECT_LE(run.max_abs_diff, kLogitTol) << "prompt of " << fc.prompt.size() << " tokens";
    EXPECT_EQ(run.greedy, fc.greedy) << "prompt of " << fc.prompt.size() << " tokens";
  }
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, TorchBinFixture, ::testing::ValuesIn(kBinCases),
                         [](const auto& p) { return std::string(p.param.bin); });

TEST(TorchCheckpoint, ViewsKeepTheirStoragesLayout) {
  // qwen2_bin_sharded: lm_head.weight shares the embedding's storage; layer 0's q_proj is a
  // transposed view (copied into row-major order); layer 1's k_proj / v_proj slice one storage;
  // the final norm is float64, read as f32.
  auto ck = open_or_fail(fixture_dir("qwen2_bin_sharded"));
  auto st = open_or_fail(fixture_dir("qwen2"));
  ASSERT_TRUE(ck && st);
  const RawTensor embed = *ck->tensor("model.embed_tokens.weight");
  const RawTensor head = *ck->tensor("lm_head.weight");
  EXPECT_EQ(head.bytes.data(), embed.bytes.data());  // one storage, viewed twice, not copied
  const RawTensor k = *ck->tensor("model.layers.1.self_attn.k_proj.weight");
  const RawTensor v = *ck->tensor("model.layers.1.self_attn.v_proj.weight");
  EXPECT_EQ(v.bytes.data(), k.bytes.data() + k.bytes.size());  // the second slice, in place
  EXPECT_EQ(ck->tensor("model.norm.weight")->dtype, DType::f32);
  // Every name the index maps is read from its shard.
  auto index = read_text_file(fixture_dir("qwen2_bin_sharded") + "/pytorch_model.bin.index.json");
  ASSERT_TRUE(index.has_value());
  const auto j = nlohmann::json::parse(*index);
  EXPECT_EQ(j.at("weight_map").size(), st->tensors().size() + 1);  // + the tied lm_head
  for (const auto& [name, file] : j.at("weight_map").items()) {
    auto t = ck->tensor(name);
    ASSERT_TRUE(t.has_value()) << name;
    EXPECT_NE(t->file.find(file.get<std::string>()), std::string::npos) << name;
  }
}

// values.json's tensor `name` as brigade reads it: shape (dimensions past the fourth folded into
// it) and every element.
void expect_values(const std::map<std::string, RawTensor>& tensors, const nlohmann::json& values, const std::string& name) {
  SCOPED_TRACE(name);
  auto it = tensors.find(name);
  ASSERT_NE(it, tensors.end());
  const RawTensor& t = it->second;
  std::vector<int64_t> shape = values.at(name).at("shape").get<std::vector<int64_t>>();
  if (shape.size() > 4) {
    for (size_t d = 4; d < shape.size(); ++d) shape[3] *= shape[d];
    shape.resize(4);
  }
  EXPECT_EQ(t.shape, shape);
  const auto& want = values.at(name).at("values");
  ASSERT_EQ(static_cast<int64_t>(want.size()), t.numel());
  ASSERT_EQ(t.bytes.size(), static_cast<size_t>(t.numel()) * dtype_size(t.dtype));
  for (int64_t i = 0; i < t.numel(); ++i) {
    const uint8_t* p = t.bytes.data() + static_cast<size_t>(i) * dtype_size(t.dtype);
    double got = 0;
    switch (t.dtype) {
      case DType::f32: case DType::f16: case DType::bf16: got = t.at(i); break;
      case DType::f8e4m3: got = e4m3_to_f32(*p); break;
      case DType::i64: { int64_t x; std::memcpy(&x, p, 8); got = static_cast<double>(x); break; }
      case DType::i32: { int32_t x; std::memcpy(&x, p, 4); got = x; break; }
      case DType::i8: got = static_cast<int8_t>(*p); break;
      case DType::u8: got = *p; break;
      default: FAIL() << "unexpected dtype " << dtype_name(t.dtype);
    }
    EXPECT_EQ(got, want[static_cast<size_t>(i)].get<double>()) << "element " << i;
  }
}

TEST(TorchCheckpoint, EveryStorageTypeAsTorchReadsIt) {
  auto text = read_text_file(fixture_dir("torch_bin_misc") + "/values.json");
  ASSERT_TRUE(text.has_value());
  const auto values = nlohmann::json::parse(*text);
  const std::map<std::string, DType> dtypes = {
      {"f32", DType::f32}, {"f16", DType::f16}, {"bf16", DType::bf16}, {"f64", DType::f32},  {"i64", DType::i64},
      {"i32", DType::i32}, {"i8", DType::i8},   {"u8", DType::u8},     {"bool", DType::u8},  {"f8e4m3", DType::f8e4m3}};
  for (const char* file : {"dtypes.bin", "dtypes_legacy.bin"}) {
    SCOPED_TRACE(file);
    const bool legacy = std::string(file) == "dtypes_legacy.bin";
    std::map<std::string, RawTensor> tensors;
    std::vector<std::vector<uint8_t>> derived;
    ASSERT_TRUE(read_file(fixture_dir("torch_bin_misc") + "/" + file, tensors, derived).is_ok());
    EXPECT_EQ(tensors.size(), values.size() - (legacy ? 1 : 0));  // the legacy stream has no float8
    for (const auto& [name, v] : values.items()) {
      if (legacy && name == "f8e4m3") continue;
      expect_values(tensors, values, name);
      if (dtypes.count(name)) {
        EXPECT_EQ(tensors.at(name).dtype, dtypes.at(name)) << name;
      }
    }
    EXPECT_TRUE(tensors.at("scalar").shape.empty());
    EXPECT_TRUE(tensors.at("empty").bytes.empty());
    if (!legacy) {  // row1 is the f32 storage's second row, viewed where it lies (the ZIP's records are aligned)
      EXPECT_EQ(tensors.at("row1").bytes.data(), tensors.at("f32").bytes.data() + 3 * sizeof(float));
    }
  }
}

TEST(TorchCheckpoint, RefusesWhatIsNotATensorStateDict) {
  const std::string dir = fixture_dir("torch_bin_misc");
  std::map<std::string, RawTensor> t;
  std::vector<std::vector<uint8_t>> d;
  // A pickle that would call os.system: refused at its GLOBAL, nothing run.
  expect_error(read_file(dir + "/system_call.bin", t, d), StatusCode::unsupported, "'posix.system'");
  expect_error(read_file(dir + "/module.bin", t, d), StatusCode::unsupported, "torch.nn.modules.linear.Linear");
  expect_error(read_file(dir + "/nested.bin", t, d), StatusCode::corrupt, "holds no tensors (its keys: model, step)");
  expect_error(read_file(dir + "/unsupported_dtype.bin", t, d), StatusCode::unsupported, "dtype int16");
  t.clear();
  // A value that is not a tensor beside tensors is left out.
  ASSERT_TRUE(read_file(dir + "/subclass_float.bin", t, d).is_ok());
  EXPECT_EQ(t.size(), 1u);
  EXPECT_TRUE(t.count("w"));
}

Status unpickle(const std::string& bytes) {
  return unpickle_state_dict({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, "test").status();
}

TEST(TorchCheckpoint, MalformedPicklesAreClearErrors) {
  using namespace std::string_literals;
  expect_error(unpickle("\x80\x02R."s), StatusCode::corrupt, "stack underflow");
  expect_error(unpickle("\x80\x02h\x05."s), StatusCode::corrupt, "memo index 5 was never stored");
  expect_error(unpickle("\x80\x02\xff"s), StatusCode::corrupt, "unknown opcode 0xff");
  expect_error(unpickle("\x80\x02X\x10\x00\x00\x00" "ab"s), StatusCode::corrupt, "truncated");
  expect_error(unpickle("\x80\x02}"s), StatusCode::corrupt, "truncated");
  expect_error(unpickle("\x80\x02(."s), StatusCode::corrupt, "open MARK");
  expect_error(unpickle("\x80\x02K\x01K\x02."s), StatusCode::corrupt, "2 values on the stack");
  expect_error(unpickle("\x80\x02K\x01."s), StatusCode::corrupt, "holds an int, not a state dict");
  expect_error(unpickle("\x80\x02}q\x00."s), StatusCode::corrupt, "holds no tensors");
  expect_error(unpickle("\x80\x02K\x00K\x01K\x02s."s), StatusCode::corrupt, "SETITEM(S) on an int");
  expect_error(unpickle("\x80\x06}."s), StatusCode::unsupported, "protocol 6");
  expect_error(unpickle("\x80\x02" "cposix\nsystem\nX\x02\x00\x00\x00ls\x85R."s), StatusCode::unsupported, "'posix.system'");
  expect_error(unpickle("\x80\x02\x8c\x05posix\x8c\x06system\x93."s), StatusCode::unsupported, "'posix.system'");
  expect_error(unpickle("\x80\x02" "ctorch._utils\n_rebuild_tensor_v2\n)R."s), StatusCode::corrupt, "with 0 arguments");
  expect_error(unpickle("\x80\x02" "ctorch\nFloatStorage\n)R."s), StatusCode::unsupported, "builds no tensor");
}

// The end of the central directory, and the entries' central records, of a ZIP archive torch wrote
// (no archive comment).
struct CentralDirectory {
  uint64_t offset = 0, size = 0, count = 0;
};
CentralDirectory central_directory(const std::vector<uint8_t>& zip) {
  const uint8_t* end = zip.data() + zip.size() - 22;
  uint32_t sig, dir_size, dir_offset;
  uint16_t count;
  std::memcpy(&sig, end, 4);
  EXPECT_EQ(sig, 0x06054b50u);
  std::memcpy(&count, end + 10, 2);
  std::memcpy(&dir_size, end + 12, 4);
  std::memcpy(&dir_offset, end + 16, 4);
  return {dir_offset, dir_size, count};
}

template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}

// `zip` with its central directory and end records in ZIP64 form, as torch's writer makes them for a
// file past 4 GiB: every size and local-header offset at its 0xFFFFFFFF marker with the values in a
// ZIP64 extra field, the entry count and directory size / offset in a ZIP64 end record found
// through its locator. The local headers and data stay where they are.
std::vector<uint8_t> as_zip64(const std::vector<uint8_t>& zip) {
  const CentralDirectory cd = central_directory(zip);
  std::vector<uint8_t> out(zip.begin(), zip.begin() + static_cast<long>(cd.offset));
  size_t at = cd.offset;
  for (uint64_t i = 0; i < cd.count; ++i) {
    const uint8_t* c = zip.data() + at;
    uint32_t compressed, size, local;
    uint16_t name_len, extra_len, comment_len;
    std::memcpy(&compressed, c + 20, 4);
    std::memcpy(&size, c + 24, 4);
    std::memcpy(&name_len, c + 28, 2);
    std::memcpy(&extra_len, c + 30, 2);
    std::memcpy(&comment_len, c + 32, 2);
    std::memcpy(&local, c + 42, 4);
    std::vector<uint8_t> rec(c, c + 46);
    const uint32_t marker = 0xFFFFFFFFu;
    const uint16_t new_extra = static_cast<uint16_t>(extra_len + 4 + 24);
    std::memcpy(rec.data() + 20, &marker, 4);
    std::memcpy(rec.data() + 24, &marker, 4);
    std::memcpy(rec.data() + 30, &new_extra, 2);
    std::memcpy(rec.data() + 42, &marker, 4);
    out.insert(out.end(), rec.begin(), rec.end());
    out.insert(out.end(), c + 46, c + 46 + name_len);
    put<uint16_t>(out, 1);   // ZIP64 extended information
    put<uint16_t>(out, 24);
    put<uint64_t>(out, size);  // uncompressed, compressed, local header offset: in this order
    put<uint64_t>(out, compressed);
    put<uint64_t>(out, local);
    out.insert(out.end(), c + 46 + name_len, c + 46 + name_len + extra_len + comment_len);
    at += 46u + name_len + extra_len + comment_len;
  }
  const uint64_t dir_size = out.size() - cd.offset, z64_at = out.size();
  put<uint32_t>(out, 0x06064b50u);
  put<uint64_t>(out, 44);
  put<uint16_t>(out, 45);
  put<uint16_t>(out, 45);
  put<uint32_t>(out, 0);
  put<uint32_t>(out, 0);
  put<uint64_t>(out, cd.count);
  put<uint64_t>(out, cd.count);
  put<uint64_t>(out, dir_size);
  put<uint64_t>(out, cd.offset);
  put<uint32_t>(out, 0x07064b50u);
  put<uint32_t>(out, 0);
  put<uint64_t>(out, z64_at);
  put<uint32_t>(out, 1);
  put<uint32_t>(out, 0x06054b50u);
  put<uint16_t>(out, 0);
  put<uint16_t>(out, 0);
  put<uint16_t>(out, 0xFFFF);
  put<uint16_t>(out, 0xFFFF);
  put<uint32_t>(out, 0xFFFFFFFFu);
  put<uint32_t>(out, 0xFFFFFFFFu);
  put<uint16_t>(out, 0);
  return out;
}

class TorchBinFiles : public ::testing::Test {
 protected:
  // A copy of opt_bin to break.
  void SetUp() override {
    fs::copy_file(fixture_dir("opt_bin") + "/config.json", dir_.file("config.json"));
    good_ = read_bytes(fixture_dir("opt_bin") + "/pytorch_model.bin");
  }
  Status open_with(const std::vector<uint8_t>& bytes) {
    write_bytes(dir_.file("pytorch_model.bin"), bytes);
    return Checkpoint::open(dir_.str()).status();
  }
  TempDir dir_{"torch_bin"};
  std::vector<uint8_t> good_;
};

TEST_F(TorchBinFiles, Zip64RecordsReadAsTheSameTensors) {
  auto want = open_or_fail(fixture_dir("opt_bin"));
  ASSERT_TRUE(want);
  ASSERT_TRUE(open_with(as_zip64(good_)).is_ok());
  auto got = open_or_fail(dir_.str());
  ASSERT_TRUE(got);
  ASSERT_EQ(got->tensors().size(), want->tensors().size());
  for (const auto& [name, t] : want->tensors()) {
    const RawTensor g = *got->tensor(name);
    ASSERT_EQ(g.bytes.size(), t.bytes.size()) << name;
    EXPECT_EQ(std::memcmp(g.bytes.data(), t.bytes.data(), t.bytes.size()), 0) << name;
  }
}

TEST_F(TorchBinFiles, TruncatedAtSeveralPoints) {
  for (const auto& bytes : {good_, as_zip64(good_), read_bytes(fixture_dir("gpt2_bin_legacy") + "/pytorch_model.bin")}) {
    for (size_t cut : {size_t{0}, size_t{3}, size_t{30}, size_t{200}, bytes.size() / 3, bytes.size() / 2, bytes.size() - 30,
                       bytes.size() - 1}) {
      SCOPED_TRACE("cut at " + std::to_string(cut) + " of " + std::to_string(bytes.size()));
      const Status st = open_with(std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<long>(cut)));
      EXPECT_EQ(st.code(), StatusCode::corrupt) << st.to_string();
      EXPECT_NE(st.message().find("pytorch_model.bin"), std::string::npos) << st.to_string();
    }
  }
}

// forged_size.bin (scripts/make_torch_bin_fixtures.py): a stored ZIP whose pickle claims its one
// DoubleStorage holds 2^61 + 6 elements, so that 8 bytes each wrap to the 48 its record holds: refused,
// not read past the record.
TEST(TorchCheckpoint, ForgedStorageSizeIsRefused) {
  std::map<std::string, RawTensor> t;
  std::vector<std::vector<uint8_t>> d;
  expect_error(read_file(fixture_dir("torch_bin_misc") + "/forged_size.bin", t, d), StatusCode::corrupt,
               "holds 48 bytes but is 2305843009213693958 x 8 bytes");
}

TEST_F(TorchBinFiles, CompressedEntryIsRefusedByName) {
  std::vector<uint8_t> bad = good_;
  const CentralDirectory cd = central_directory(bad);
  const uint16_t deflate = 8;
  std::memcpy(bad.data() + cd.offset + 10, &deflate, 2);  // the first entry's method
  expect_error(open_with(bad), StatusCode::unsupported, "is compressed (method 8)");
}

TEST_F(TorchBinFiles, MissingStorageRecordIsNamed) {
  // Rename the first storage record data/0 -> data/X in the central directory.
  std::vector<uint8_t> bad = good_;
  const CentralDirectory cd = central_directory(bad);
  const std::string from = "/data/0";
  auto it = std::search(bad.begin() + static_cast<long>(cd.offset), bad.end(), from.begin(), from.end());
  ASSERT_NE(it, bad.end());
  *(it + 6) = 'X';
  expect_error(open_with(bad), StatusCode::corrupt, "data/0 is missing from the archive");
}

TEST_F(TorchBinFiles, RandomByteChangesNeverCrash) {
  // Bytes changed in the pickle, the storages' headers and the central directory: each file is
  // read or refused with a status naming it, never a crash (the ASan build reads past nothing).
  std::mt19937 rng(3621);
  const CentralDirectory cd = central_directory(good_);
  struct Source {
    std::vector<uint8_t> bytes;
    bool zip;
  };
  for (const Source& src : {Source{good_, true}, Source{read_bytes(fixture_dir("gpt2_bin_legacy") + "/pytorch_model.bin"), false}}) {
    for (int trial = 0; trial < 150; ++trial) {
      std::vector<uint8_t> bad = src.bytes;
      // The pickle (within the first 1.5 KB) or, for the ZIP, every other trial, its central directory onwards.
      const bool directory = src.zip && trial % 2 == 1;
      const size_t lo = directory ? cd.offset : 0, hi = directory ? bad.size() : std::min<size_t>(1536, bad.size());
      for (int k = 0; k < 1 + trial % 4; ++k) bad[lo + rng() % (hi - lo)] = static_cast<uint8_t>(rng());
      const Status st = open_with(bad);
      if (!st.is_ok()) {
        EXPECT_NE(st.message().find("pytorch_model.bin"), std::string::npos) << st.to_string();
      }
    }
  }
}

TEST_F(TorchBinFiles, SafetensorsAreReadFirst) {
  // A directory with both: the safetensors (as transformers and vLLM choose), so a broken .bin
  // beside a good model.safetensors changes nothing.
  write_bytes(dir_.file("pytorch_model.bin"), {'n', 'o', 't'});
  fs::copy_file(fixture_dir("opt") + "/model.safetensors", dir_.file("model.safetensors"));
  auto ck = open_or_fail(dir_.str());
  ASSERT_TRUE(ck);
  EXPECT_EQ(ck->format(), "safetensors");
  fs::remove(dir_.file("model.safetensors"));
  expect_error(Checkpoint::open(dir_.str()).status(), StatusCode::corrupt, "not a torch.save checkpoint");
}

TEST(ZipArchive, NotAZipOrNoDataPkl) {
  TempDir dir("zip");
  write_bytes(dir.file("a.bin"), std::vector<uint8_t>(64, 'x'));
  auto f = MappedFile::open(dir.file("a.bin"));
  ASSERT_TRUE(f.has_value());
  expect_error(read_zip_entries(**f).status(), StatusCode::corrupt, "no ZIP end-of-central-directory record");
  // The real archive's entries: torch's records, each inside the file.
  auto real = MappedFile::open(fixture_dir("opt_bin") + "/pytorch_model.bin");
  ASSERT_TRUE(real.has_value());
  auto entries = read_zip_entries(**real);
  ASSERT_TRUE(entries.has_value()) << entries.status().to_string();
  ASSERT_TRUE(entries->count("pytorch_model/data.pkl"));
  ASSERT_TRUE(entries->count("pytorch_model/byteorder"));
  const ZipEntry bo = entries->at("pytorch_model/byteorder");
  EXPECT_EQ(std::string(reinterpret_cast<const char*>((*real)->data() + bo.offset), bo.size), "little");
  for (const auto& [name, e] : *entries)
    if (name.find("/data/") != std::string::npos) {
      EXPECT_EQ(e.offset % 64, 0u) << name;  // torch aligns its records
    }
}

}  // namespace
}  // namespace brigade
