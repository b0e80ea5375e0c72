#include "actors/node/node_auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace brigade {

namespace {

// Fields joined with a length before each, so no two different field lists give one message.
std::string framed(std::initializer_list<std::string> fields) {
  std::string out;
  for (const std::string& f : fields) {
    out += std::to_string(f.size());
    out += ':';
    out += f;
  }
  return out;
}

}  // namespace

std::string hmac_sha256(const std::string& key, const std::string& data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  const unsigned char* done = HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
                                   reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &n);
  BRIGADE_CHECK(done != nullptr && n == 32, "HMAC-SHA256 failed");
  return std::string(reinterpret_cast<const char*>(out), n);
}

Expected<std::string> load_node_token(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("cannot read the node token file '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string token = ss.str();
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  if (token.size() < 16)
    return invalid_argument("the node token in '" + path + "' is " + std::to_string(token.size()) +
                            " bytes; use at least 16 (e.g. `openssl rand -hex 32 > " + path + "`)");
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & (S_IRWXG | S_IRWXO)) != 0)
    spdlog::warn("the node token file '{}' is readable by others than its owner (chmod 600 it)", path);
  return token;
}

std::string random_nonce() {
  std::string out(32, '\0');
  BRIGADE_CHECK(RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(out.size())) == 1,
                "the system's random generator failed");
  return out;
}

std::string hello_proof(const std::string& token, const std::string& challenge, const std::string& instance,
                        const std::string& role) {
  return hmac_sha256(token, framed({"brigade-node-hello", challenge, instance, role}));
}

std::string answer_proof(const std::string& token, const std::string& nonce, const std::string& instance) {
  return hmac_sha256(token, framed({"brigade-node-answer", nonce, instance}));
}

bool same_proof(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string ChallengeBook::issue() {
  std::string c = random_nonce();
  outstanding_.push_back(c);
  if (outstanding_.size() > capacity_) outstanding_.pop_front();
  return c;
}

bool ChallengeBook::redeem(const std::string& challenge) {
  auto it = std::find_if(outstanding_.begin(), outstanding_.end(),
                         [&](const std::string& c) { return same_proof(c, challenge); });
  if (it == outstanding_.end()) return false;
  outstanding_.erase(it);
  return true;
}

}  // namespace brigade
