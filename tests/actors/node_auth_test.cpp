// The node authentication's pieces (actors/node/node_auth.h): HMAC-SHA256 against RFC 4231's
// vectors, proofs bound to every field, single-use challenges, token files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "actors/node/node_auth.h"

namespace brigade {
namespace {

std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

TEST(NodeAuth, HmacSha256MatchesRfc4231) {
  // RFC 4231 test cases 1 and 2.
  EXPECT_EQ(hex(hmac_sha256(std::string(20, '\x0b'), "Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(hex(hmac_sha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(NodeAuth, ProofsBindTokenChallengeInstanceAndRole) {
  const std::string token = "0123456789abcdef", c = random_nonce();
  const std::string p = hello_proof(token, c, "a", "both");
  EXPECT_EQ(p.size(), 32u);
  EXPECT_TRUE(same_proof(p, hello_proof(token, c, "a", "both")));
  EXPECT_FALSE(same_proof(p, hello_proof("0123456789abcdeX", c, "a", "both")));
  EXPECT_FALSE(same_proof(p, hello_proof(token, random_nonce(), "a", "both")));
  EXPECT_FALSE(same_proof(p, hello_proof(token, c, "b", "both")));
  EXPECT_FALSE(same_proof(p, hello_proof(token, c, "a", "decode")));
  // Fields are framed: moving a byte from one field to the next changes the proof.
  EXPECT_FALSE(same_proof(hello_proof(token, c, "ab", "c"), hello_proof(token, c, "a", "bc")));
  // The answer's proof is another message: a hello proof replayed as an answer fails.
  EXPECT_FALSE(same_proof(answer_proof(token, c, "a"), hello_proof(token, c, "a", "")));
  EXPECT_FALSE(same_proof(p, p.substr(0, 31)));
  EXPECT_NE(random_nonce(), random_nonce());
}

TEST(NodeAuth, ChallengesAreSingleUseAndBounded) {
  ChallengeBook book(3);
  const std::string a = book.issue(), b = book.issue();
  EXPECT_TRUE(book.redeem(a));
  EXPECT_FALSE(book.redeem(a)) << "a spent challenge replays nothing";
  EXPECT_FALSE(book.redeem(random_nonce()));
  EXPECT_FALSE(book.redeem(""));
  const std::string c = book.issue(), d = book.issue(), e = book.issue();
  EXPECT_EQ(book.n_outstanding(), 3u);
  EXPECT_FALSE(book.redeem(b)) << "the oldest is forgotten past the capacity";
  EXPECT_TRUE(book.redeem(e));
  EXPECT_TRUE(book.redeem(c));
  EXPECT_TRUE(book.redeem(d));
}

TEST(NodeAuth, TokenFilesAreTrimmedAndLongEnough) {
  const auto dir = std::filesystem::temp_directory_path() / ("brigade_node_auth_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string good = (dir / "good").string(), short_one = (dir / "short").string();
  std::ofstream(good) << "0123456789abcdef0123\n\n";
  std::ofstream(short_one) << "abc\n";
  EXPECT_EQ(*load_node_token(good), "0123456789abcdef0123");
  EXPECT_NE(load_node_token(short_one).status().message().find("is 3 bytes; use at least 16"), std::string::npos);
  EXPECT_EQ(load_node_token((dir / "absent").string()).status().code(), StatusCode::not_found);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace brigade
