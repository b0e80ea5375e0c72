// msg<T> through CAF: zero copy in one actor system, flat bytes between two actor systems joined
// by the middleman over 127.0.0.1, and malformed payloads turned into errors, not crashes.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "messages/error.h"
#include "messages/registry.h"
#include "tests/messages/test_messages.h"

namespace brigade {
namespace {

using Bytes = std::vector<uint8_t>;
constexpr auto timeout = std::chrono::seconds(20);

// Echoes envelopes back unchanged; parses raw bytes as a GenerateRequest and answers its id, or
// the parse error (how an actor fronting an untrusted byte stream reports bad input).
using echo_actor = caf::typed_actor<
    caf::replies_to<generate_request_msg>::with<generate_request_msg>,
    caf::replies_to<step_plan_msg>::with<step_plan_msg>,
    caf::replies_to<Bytes>::with<uint64_t>>;

echo_actor::behavior_type echo_impl() {
  return {
      [](const generate_request_msg& m) { return m; },
      [](const step_plan_msg& m) { return m; },
      [](const Bytes& bytes) -> caf::result<uint64_t> {
        auto parsed = generate_request_msg::from_bytes(bytes);
        if (!parsed.has_value()) return to_caf_error(parsed.status());
        return (*parsed)->getRequestId();
      },
  };
}

struct NodeConfig : caf::actor_system_config {
  NodeConfig() {
    load<caf::io::middleman>();
    register_message_types(*this);
    add_message_type<Bytes>("brigade.test.Bytes");
  }
};

// Sends `m` to `dest` from a scoped actor of `sys` and returns the reply (empty on error, with a
// test failure recorded).
template <class Handle, class M>
M ask(caf::actor_system& sys, const Handle& dest, const M& m) {
  caf::scoped_actor self{sys};
  M reply;
  self->request(dest, timeout, m)
      .receive([&](const M& r) { reply = r; },
               [&](const caf::error& e) { ADD_FAILURE() << "request failed: " << sys.render(e); });
  return reply;
}

TEST(CafLocal, MessagesPassByPointer) {
  NodeConfig cfg;
  caf::actor_system sys{cfg};
  auto echo = sys.spawn(echo_impl);
  auto original = test::make_text_request(3);
  auto reply = ask(sys, echo, original);
  ASSERT_FALSE(reply.empty());
  EXPECT_EQ(reply.storage_id(), original.storage_id()) << "in-process send copied the message";
  auto plan = test::make_step_plan(4, 2, 2);
  EXPECT_EQ(ask(sys, echo, plan).storage_id(), plan.storage_id());
  caf::anon_send_exit(echo, caf::exit_reason::user_shutdown);
}

class CafRemote : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = sys_a_.spawn(echo_impl);
    auto port = caf::io::publish(server_, 0, "127.0.0.1");
    ASSERT_TRUE(port) << sys_a_.render(port.error());
    auto remote = caf::io::remote_actor<echo_actor>(sys_b_, "127.0.0.1", *port);
    ASSERT_TRUE(remote) << sys_b_.render(remote.error());
    remote_ = *remote;
  }
  void TearDown() override { caf::anon_send_exit(server_, caf::exit_reason::user_shutdown); }

  NodeConfig cfg_a_;
  NodeConfig cfg_b_;
  caf::actor_system sys_a_{cfg_a_};
  caf::actor_system sys_b_{cfg_b_};
  echo_actor server_;
  echo_actor remote_;
};

TEST_F(CafRemote, GenerateRequestRoundTripsWithEqualBytes) {
  for (const auto& original : {test::make_text_request(42), test::make_token_request(43, {9, 8, 7})}) {
    auto echoed = ask(sys_b_, remote_, original);
    ASSERT_FALSE(echoed.empty());
    EXPECT_NE(echoed.storage_id(), original.storage_id()) << "crossed a process boundary";
    EXPECT_EQ(echoed.to_bytes(), original.to_bytes());
    EXPECT_EQ(echoed->getRequestId(), original->getRequestId());
    EXPECT_EQ(echoed.debug_string(), original.debug_string());
  }
}

TEST_F(CafRemote, StepPlanRoundTripsWithEqualBytes) {
  for (const auto& original : {test::make_step_plan(7, 3, 4), test::make_step_plan(8, 2000, 16)}) {
    auto echoed = ask(sys_b_, remote_, original);
    ASSERT_FALSE(echoed.empty());
    EXPECT_EQ(echoed.to_bytes(), original.to_bytes());
    EXPECT_EQ(echoed->getSeqs().size(), original->getSeqs().size());
  }
}

TEST_F(CafRemote, MalformedBytesAreAnErrorReply) {
  caf::scoped_actor self{sys_b_};
  auto good = test::make_text_request(77).to_bytes();
  uint64_t id = 0;
  self->request(remote_, timeout, good)
      .receive([&](uint64_t r) { id = r; },
               [&](const caf::error& e) { ADD_FAILURE() << sys_b_.render(e); });
  EXPECT_EQ(id, 77u);

  Bytes bad = good;
  bad.resize(bad.size() - 8);  // truncated
  caf::error error;
  self->request(remote_, timeout, bad)
      .receive([&](uint64_t) { ADD_FAILURE() << "truncated bytes accepted"; },
               [&](const caf::error& e) { error = e; });
  ASSERT_TRUE(error);
  const Status status = to_status(error);
  EXPECT_EQ(status.code(), StatusCode::corrupt) << status.to_string();
  EXPECT_NE(status.message().find("GenerateRequest"), std::string::npos) << status.to_string();
  EXPECT_EQ(sys_b_.render(error), status.to_string());
}

// A hostile or broken peer: it registers its own type under the name "brigade.GenerateRequest"
// and sends garbage in the same wire format (a byte sequence). The receiving node must neither
// crash nor deliver a msg; the sender gets an error, and the receiver keeps serving.
struct FakeRequest {
  Bytes payload;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, FakeRequest& x) {
  return f(caf::meta::type_name("FakeRequest"), x.payload);
}

struct HostileConfig : caf::actor_system_config {
  HostileConfig() {
    load<caf::io::middleman>();
    add_message_type<FakeRequest>("brigade.GenerateRequest");
    add_message_type<step_plan_msg>("brigade.StepPlan");
    add_message_type<Bytes>("brigade.test.Bytes");
  }
};

// echo_actor as the hostile node sees it: the same names on the wire, so the interface check of
// remote_actor passes.
using fake_echo_actor = caf::typed_actor<caf::replies_to<FakeRequest>::with<FakeRequest>,
                                         caf::replies_to<step_plan_msg>::with<step_plan_msg>,
                                         caf::replies_to<Bytes>::with<uint64_t>>;

TEST_F(CafRemote, GarbageFromAPeerIsAnErrorNotACrash) {
  HostileConfig cfg_c;
  caf::actor_system sys_c{cfg_c};
  auto port = sys_a_.middleman().publish(server_, 0, "127.0.0.1");
  ASSERT_TRUE(port) << sys_a_.render(port.error());
  auto fake = caf::io::remote_actor<fake_echo_actor>(sys_c, "127.0.0.1", *port);
  ASSERT_TRUE(fake) << sys_c.render(fake.error());
  const Bytes good = test::make_text_request(1).to_bytes();
  Bytes truncated(good.begin(), good.end() - 8);
  for (const Bytes& payload : {Bytes{1, 2, 3}, truncated, Bytes(64, 0xff)}) {
    caf::scoped_actor self{sys_c};
    bool got_error = false;
    self->request(*fake, std::chrono::seconds(5), FakeRequest{payload})
        .receive([&](const FakeRequest&) { ADD_FAILURE() << "garbage was echoed"; },
                 [&](const caf::error& e) {
                   got_error = true;
                   EXPECT_NE(e, caf::sec::request_timeout) << "the node dropped it silently";
                 });
    EXPECT_TRUE(got_error);
  }
  // The server's node is unharmed.
  auto echoed = ask(sys_b_, remote_, test::make_text_request(5));
  EXPECT_EQ(echoed.to_bytes(), test::make_text_request(5).to_bytes());
}

// What the middleman does with an incoming message: deserialise a caf::message by type name.
class CafSerialization : public ::testing::Test {
 protected:
  std::vector<char> serialize(caf::message m) {
    std::vector<char> buf;
    caf::binary_serializer sink{sys_, buf};
    auto err = sink(m);
    EXPECT_FALSE(err) << sys_.render(err);
    return buf;
  }
  caf::error deserialize(const std::vector<char>& buf, caf::message& out) {
    caf::binary_deserializer source{sys_, buf};
    return source(out);
  }

  NodeConfig cfg_;
  caf::actor_system sys_{cfg_};
};

TEST_F(CafSerialization, RoundTrip) {
  auto original = test::make_token_event(5);
  caf::message decoded;
  auto err = deserialize(serialize(caf::make_message(original)), decoded);
  ASSERT_FALSE(err) << sys_.render(err);
  ASSERT_TRUE(decoded.match_elements<token_event_msg>());
  EXPECT_EQ(decoded.get_as<token_event_msg>(0).to_bytes(), original.to_bytes());
}

TEST_F(CafSerialization, CorruptPayloadIsAnError) {
  const Bytes flat = test::make_text_request(5).to_bytes();
  auto original = test::make_text_request(5);
  std::vector<char> buf;
  {
    caf::binary_serializer sink{sys_, buf};
    ASSERT_FALSE(sink(original));
  }
  // The flat message is the tail of CAF's encoding; break its segment table.
  ASSERT_GE(buf.size(), flat.size());
  const std::size_t at = buf.size() - flat.size();
  ASSERT_EQ(std::memcmp(buf.data() + at, flat.data(), flat.size()), 0);
  const uint32_t huge = 0xfffffffeu;
  std::memcpy(buf.data() + at, &huge, 4);
  generate_request_msg decoded;
  caf::binary_deserializer source{sys_, buf};
  auto err = source(decoded);
  ASSERT_TRUE(err) << "corrupt payload accepted";
  EXPECT_TRUE(decoded.empty());
  EXPECT_EQ(to_status(err).code(), StatusCode::corrupt) << sys_.render(err);
  EXPECT_NE(sys_.render(err).find("segments"), std::string::npos) << sys_.render(err);

  // Inside a caf::message (the middleman's path) CAF 0.17.6 drops the element's error and yields
  // an empty message; what matters is that the corrupt bytes never become a msg.
  std::vector<char> framed = serialize(caf::make_message(original));
  std::memcpy(framed.data() + framed.size() - flat.size(), &huge, 4);
  caf::message decoded_message;
  (void)deserialize(framed, decoded_message);
  EXPECT_FALSE(decoded_message.match_elements<generate_request_msg>());
}

TEST_F(CafSerialization, OversizedLengthIsRejectedBeforeAllocating) {
  // A lone msg whose length prefix claims 2^31 bytes (CAF's 7-bit varint).
  std::vector<char> buf{'\x80', '\x80', '\x80', '\x80', '\x08', '\0', '\0', '\0'};
  generate_request_msg decoded;
  caf::binary_deserializer source{sys_, buf};
  auto err = source(decoded);
  ASSERT_TRUE(err);
  EXPECT_EQ(to_status(err).code(), StatusCode::corrupt) << sys_.render(err);
  EXPECT_TRUE(decoded.empty());
}

TEST_F(CafSerialization, EmptyMsgRoundTripsAsEmpty) {
  caf::message decoded;
  auto err = deserialize(serialize(caf::make_message(abort_msg())), decoded);
  ASSERT_FALSE(err) << sys_.render(err);
  ASSERT_TRUE(decoded.match_elements<abort_msg>());
  EXPECT_TRUE(decoded.get_as<abort_msg>(0).empty());
}

TEST_F(CafSerialization, StringificationShowsFields) {
  const std::string text = caf::deep_to_string(test::make_abort(31));
  EXPECT_NE(text.find("requestId = 31"), std::string::npos) << text;
}

}  // namespace
}  // namespace brigade
