// msg<T>: building, zero-copy sharing, flat-byte round trips and rejection of malformed bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <thread>
#include <string>
#include <vector>

#include "messages/envelope.h"
#include "tests/messages/test_messages.h"

namespace brigade {
namespace {

using Bytes = std::vector<uint8_t>;

// Little-endian word access into a flat message, for crafting malformed inputs.
uint64_t get_word(const Bytes& b, std::size_t index) {
  uint64_t w;
  std::memcpy(&w, b.data() + 8 * index, 8);
  return w;
}
void set_word(Bytes& b, std::size_t index, uint64_t w) { std::memcpy(b.data() + 8 * index, &w, 8); }

// Word index of the root struct's data section in a single-segment flat message (table = word 0,
// root pointer = word 1), and its data size in words.
struct RootLayout {
  std::size_t data_word;
  std::size_t n_data_words;
};
RootLayout root_layout(const Bytes& b) {
  EXPECT_EQ(get_word(b, 0) & 0xffffffffu, 0u) << "helper expects one segment";
  const uint64_t ptr = get_word(b, 1);
  EXPECT_EQ(ptr & 3u, 0u) << "root is a struct pointer";
  const auto offset = static_cast<int32_t>(static_cast<uint32_t>(ptr)) >> 2;
  return {static_cast<std::size_t>(2 + offset), static_cast<std::size_t>((ptr >> 32) & 0xffff)};
}

template <class T>
void expect_corrupt(const Bytes& bytes, const std::string& needle = "") {
  auto parsed = msg<T>::from_bytes(bytes);
  ASSERT_FALSE(parsed.has_value()) << "accepted " << bytes.size() << " bytes";
  EXPECT_EQ(parsed.status().code(), StatusCode::corrupt) << parsed.status().to_string();
  if (!needle.empty()) {
    EXPECT_NE(parsed.status().message().find(needle), std::string::npos)
        << parsed.status().to_string();
  }
}

TEST(Envelope, BuildAndReadEveryType) {
  auto request = test::make_text_request(7);
  ASSERT_FALSE(request.empty());
  EXPECT_EQ(request->getRequestId(), 7u);
  ASSERT_TRUE(request->getPrompt().isText());
  EXPECT_EQ(to_string_view(request->getPrompt().getText()), "Once upon a time");
  EXPECT_FLOAT_EQ(request->getSampling().getTemperature(), 0.7f);
  EXPECT_FLOAT_EQ(request->getSampling().getTopP(), 1.0f);  // schema default
  EXPECT_EQ(to_vector(request->getStop().getTokenIds()), (std::vector<int32_t>{2, 13}));
  EXPECT_EQ(to_vector(request->getStop().getStrings()),
            (std::vector<std::string>{"\n\n", "The end"}));

  auto tokens = test::make_token_request(8, {1, 2, 3});
  ASSERT_TRUE(tokens->getPrompt().isTokenIds());
  EXPECT_EQ(to_vector(tokens->getPrompt().getTokenIds()), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_FALSE(tokens->getAddBos());

  auto event = test::make_token_event(9);
  EXPECT_EQ(event->getFinishReason(), schema::FinishReason::LENGTH);
  EXPECT_EQ(event->getLogprobs()[0].getTop()[0].getTokenId(), 7);
  EXPECT_EQ(test::make_abort(10)->getRequestId(), 10u);

  auto plan = test::make_step_plan(11, 3, 4);
  ASSERT_EQ(plan->getSeqs().size(), 3u);
  EXPECT_EQ(to_vector(plan->getSeqs()[2].getTokens()), (std::vector<int32_t>{62, 63, 64, 65}));
  EXPECT_EQ(to_vector(plan->getReleased()), (std::vector<uint64_t>{7, 8, 9}));
  EXPECT_EQ(test::make_step_result(12)->getSampled()[1].getTokenId(), 43);
  EXPECT_EQ(test::make_lease_request(13)->getNPages(), 64);
  EXPECT_EQ(to_vector(test::make_lease_grant(14)->getPages()), (std::vector<int32_t>{3, 4, 5, 9}));
  EXPECT_EQ(test::make_page_free()->getPages().size(), 2u);
}

TEST(Envelope, CopiesShareStorage) {
  auto a = test::make_text_request(1);
  generate_request_msg b = a;
  generate_request_msg c;
  c = b;
  EXPECT_NE(a.storage_id(), nullptr);
  EXPECT_EQ(a.storage_id(), b.storage_id());
  EXPECT_EQ(a.storage_id(), c.storage_id());
  // Same bytes, not equal copies: the text lives at one address.
  EXPECT_EQ(a->getPrompt().getText().begin(), c->getPrompt().getText().begin());
  // A copy outlives the original.
  const char* text = a->getPrompt().getText().begin();
  a = generate_request_msg();
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(b->getPrompt().getText().begin(), text);
  EXPECT_EQ(to_string_view(b->getPrompt().getText()), "Once upon a time");
  // Another build is another storage.
  EXPECT_NE(test::make_text_request(1).storage_id(), b.storage_id());
}

TEST(Envelope, EmptyMessage) {
  generate_request_msg m;
  EXPECT_TRUE(m.empty());
  EXPECT_TRUE(m.to_bytes().empty());
  EXPECT_EQ(m.storage_id(), nullptr);
  EXPECT_EQ(m.debug_string(), "<empty>");
  EXPECT_DEATH((void)m.reader(), "empty msg");
}

template <class T>
void expect_round_trip(const msg<T>& original) {
  const Bytes bytes = original.to_bytes();
  ASSERT_EQ(bytes.size() % 8, 0u);
  auto parsed = msg<T>::from_bytes(bytes);
  ASSERT_TRUE(parsed.has_value()) << parsed.status().to_string();
  EXPECT_EQ(parsed->to_bytes(), bytes);
  EXPECT_NE(parsed->storage_id(), original.storage_id());
  EXPECT_EQ(parsed->debug_string(), original.debug_string());
  EXPECT_TRUE(capnp::AnyStruct::Reader(parsed->reader()) == capnp::AnyStruct::Reader(original.reader()));
}

TEST(Envelope, FlatBytesRoundTripEveryType) {
  expect_round_trip(test::make_text_request(1));
  expect_round_trip(test::make_token_request(2, {5, 6, 7, 8, 9}));
  expect_round_trip(test::make_token_event(3));
  expect_round_trip(test::make_abort(4));
  expect_round_trip(test::make_step_plan(5, 4, 3));
  expect_round_trip(test::make_step_result(6));
  expect_round_trip(test::make_lease_request(7));
  expect_round_trip(test::make_lease_grant(8));
  expect_round_trip(test::make_page_free());
  auto parsed = generate_request_msg::from_bytes(test::make_text_request(99).to_bytes());
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ((*parsed)->getRequestId(), 99u);
  EXPECT_EQ(to_string_view((*parsed)->getStop().getStrings()[1]), "The end");
}

TEST(Envelope, MultiSegmentRoundTrip) {
  auto plan = test::make_step_plan(1, 2000, 16);  // far beyond the 2 KiB first segment
  const Bytes bytes = plan.to_bytes();
  uint32_t n_segments_minus_one;
  std::memcpy(&n_segments_minus_one, bytes.data(), 4);
  ASSERT_GT(n_segments_minus_one, 0u) << "expected a multi-segment message";
  expect_round_trip(plan);
  auto parsed = step_plan_msg::from_bytes(bytes);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ((*parsed)->getSeqs()[1999].getSeqId(), 2999u);
  // Read it many times: the long-lived reader has no traversal budget to exhaust.
  uint64_t sum = 0;
  for (int pass = 0; pass < 10; ++pass) {
    for (auto seq : (*parsed)->getSeqs()) sum += seq.getTokens()[15];
  }
  EXPECT_GT(sum, 0u);
}

TEST(Envelope, AcceptsUnalignedInput) {
  const Bytes bytes = test::make_token_event(5).to_bytes();
  Bytes shifted(bytes.size() + 1);
  std::memcpy(shifted.data() + 1, bytes.data(), bytes.size());
  auto parsed = token_event_msg::from_bytes(std::span<const uint8_t>(shifted).subspan(1));
  ASSERT_TRUE(parsed.has_value()) << parsed.status().to_string();
  EXPECT_EQ(to_string_view((*parsed)->getText()), "hello");
}

TEST(Envelope, ConcurrentReadersShareOneMessage) {
  // Built and parsed messages are read, copied and serialised from several threads at once
  // (run under -DBRIGADE_SANITIZE=thread to check there is no hidden mutation).
  const auto built = test::make_step_plan(1, 64, 8);
  const auto parsed = step_plan_msg::from_bytes(built.to_bytes());
  ASSERT_TRUE(parsed.has_value());
  const Bytes expected = built.to_bytes();
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        step_plan_msg copy = (t % 2 == 0) ? built : *parsed;
        int64_t sum = 0;
        for (auto seq : copy->getSeqs()) sum += seq.getTokens()[7];
        if (sum > 0 && copy.to_bytes() == expected) ++ok[static_cast<std::size_t>(t)];
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(ok, std::vector<int>(4, 50));
}

TEST(EnvelopeMalformed, EmptyAndShortInputs) {
  expect_corrupt<schema::GenerateRequest>({}, "empty");
  expect_corrupt<schema::GenerateRequest>({1, 2, 3}, "multiple of 8");
  expect_corrupt<schema::GenerateRequest>(Bytes(13, 0), "multiple of 8");
  // A one-segment table whose segment is empty: no root pointer.
  expect_corrupt<schema::GenerateRequest>(Bytes(8, 0));
}

TEST(EnvelopeMalformed, RandomGarbage) {
  std::mt19937_64 rng(42);
  for (std::size_t size : {8u, 16u, 64u, 256u, 4096u, 4099u}) {
    Bytes garbage(size);
    for (auto& byte : garbage) byte = static_cast<uint8_t>(rng());
    expect_corrupt<schema::StepPlan>(garbage);
  }
}

TEST(EnvelopeMalformed, GarbageBodyUnderValidTableNeverCrashes) {
  // A consistent segment table over random words: capnp may find a valid (if meaningless)
  // message by chance, but must never crash, and whatever it accepts must be readable.
  std::mt19937_64 rng(7);
  int n_rejected = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const uint32_t n_words = 1 + static_cast<uint32_t>(rng() % 32);
    Bytes b(8 * (n_words + 1));
    const uint32_t table[2] = {0, n_words};
    std::memcpy(b.data(), table, 8);
    for (std::size_t i = 8; i < b.size(); ++i) b[i] = static_cast<uint8_t>(rng());
    auto parsed = generate_request_msg::from_bytes(b);
    if (parsed.has_value()) {
      EXPECT_FALSE(parsed->debug_string().empty());
    } else {
      ++n_rejected;
      EXPECT_EQ(parsed.status().code(), StatusCode::corrupt);
    }
  }
  EXPECT_GT(n_rejected, 100);
}

TEST(EnvelopeMalformed, TruncatedAtEveryWord) {
  for (const Bytes& full : {test::make_text_request(1).to_bytes(),
                            test::make_step_plan(2, 3, 5).to_bytes(),
                            test::make_token_event(3).to_bytes()}) {
    for (std::size_t size = 0; size < full.size(); size += 8) {
      Bytes cut(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(size));
      expect_corrupt<schema::GenerateRequest>(cut);
      expect_corrupt<schema::StepPlan>(cut);
    }
  }
}

TEST(EnvelopeMalformed, TruncatedWithConsistentTable) {
  // The table is patched to the shorter length, so only capnp's pointer bounds checks can
  // notice: every object in a built message is referenced, so every cut loses one.
  const Bytes full = test::make_step_plan(2, 3, 5).to_bytes();
  for (std::size_t n_words = 1; n_words + 1 < full.size() / 8; ++n_words) {
    Bytes cut(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(8 * (n_words + 1)));
    const uint32_t table[2] = {0, static_cast<uint32_t>(n_words)};
    std::memcpy(cut.data(), table, 8);
    expect_corrupt<schema::StepPlan>(cut, "invalid Cap'n Proto message");
  }
}

TEST(EnvelopeMalformed, TrailingBytes) {
  Bytes b = test::make_abort(1).to_bytes();
  b.resize(b.size() + 8, 0);
  expect_corrupt<schema::Abort>(b, "trailing");
}

TEST(EnvelopeMalformed, AbsurdSegmentCount) {
  Bytes b = test::make_abort(1).to_bytes();
  const uint32_t huge = 0xfffffffeu;
  std::memcpy(b.data(), &huge, 4);
  expect_corrupt<schema::Abort>(b, "segments");
  const uint32_t many = 511;  // within the limit, but the table does not fit
  std::memcpy(b.data(), &many, 4);
  expect_corrupt<schema::Abort>(b, "truncated segment table");
  Bytes sizes = test::make_abort(1).to_bytes();
  const uint32_t big_segment = 0x7fffffffu;
  std::memcpy(sizes.data() + 4, &big_segment, 4);
  expect_corrupt<schema::Abort>(sizes, "truncated message");
}

TEST(EnvelopeMalformed, RootPointerOutside) {
  Bytes b = test::make_text_request(1).to_bytes();
  uint64_t ptr = get_word(b, 1);
  ptr = (ptr & ~uint64_t{0xffffffff}) | (uint64_t{1} << 22);  // struct at +2^20 words
  set_word(b, 1, ptr);
  expect_corrupt<schema::GenerateRequest>(b, "invalid Cap'n Proto message");
  // A far pointer into a segment that does not exist.
  Bytes far = test::make_text_request(1).to_bytes();
  set_word(far, 1, (uint64_t{99} << 32) | 2u);
  expect_corrupt<schema::GenerateRequest>(far, "invalid Cap'n Proto message");
}

TEST(EnvelopeMalformed, NestedPointerOutside) {
  // GenerateRequest's first pointer is the prompt text: point it far past the end.
  Bytes b = test::make_text_request(1).to_bytes();
  const RootLayout root = root_layout(b);
  const std::size_t text_ptr = root.data_word + root.n_data_words;
  uint64_t ptr = get_word(b, text_ptr);
  ASSERT_EQ(ptr & 3u, 1u) << "expected a list pointer";
  ptr = (ptr & ~uint64_t{0xffffffff}) | (uint64_t{1} << 24) | 1u;
  set_word(b, text_ptr, ptr);
  expect_corrupt<schema::GenerateRequest>(b, "GenerateRequest");
}

TEST(EnvelopeMalformed, UnterminatedText) {
  Bytes b = test::make_token_event(1).to_bytes();
  const std::string needle("hello\0", 6);
  auto at = std::search(b.begin(), b.end(), needle.begin(), needle.end());
  ASSERT_NE(at, b.end());
  // Overwrite the NUL and the padding after it so the text has no terminator at all.
  for (auto it = at + 5; it != b.end() && (it - b.begin()) % 8 != 0; ++it) *it = 'x';
  *(at + 5) = 'x';
  expect_corrupt<schema::TokenEvent>(b, "NUL");
}

TEST(EnvelopeMalformed, UnknownEnumValue) {
  auto event = token_event_msg::build([](schema::TokenEvent::Builder b) {
    b.setFinishReason(static_cast<schema::FinishReason>(99));
  });
  expect_corrupt<schema::TokenEvent>(event.to_bytes(), "finishReason");
}

TEST(EnvelopeMalformed, UnknownUnionTag) {
  Bytes b = test::make_text_request(1).to_bytes();
  const RootLayout root = root_layout(b);
  auto prompt = capnp::Schema::from<schema::GenerateRequest>().getFieldByName("prompt");
  const uint32_t tag_offset = prompt.getType().asStruct().getProto().getStruct().getDiscriminantOffset();
  const uint16_t bad_tag = 77;
  std::memcpy(b.data() + 8 * root.data_word + 2 * tag_offset, &bad_tag, 2);
  expect_corrupt<schema::GenerateRequest>(b, "union tag");
}

}  // namespace
}  // namespace brigade
