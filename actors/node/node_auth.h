// Authentication between a front and its `brigade node`s (docs/architecture.md "Processes"):
// a shared secret (the topology's `node_token_file`) proven by HMAC-SHA256 challenge-response in
// both directions, so the secret never crosses the wire and a recorded hello cannot be replayed.
//
//   front                                  node
//   (info) ─────────────────────────────▶  issues a fresh 32-byte challenge (single use)
//          ◀───── NodeInfo{challenge, authRequired}
//   (hello, NodeHello{challenge, nonce,
//     proof = HMAC(token, "brigade-node-hello" | challenge | instance | role)}) ─▶  checks and spends it
//          ◀───── NodeInfo{proof = HMAC(token, "brigade-node-answer" | nonce | instance)}
//   the front checks the node's proof: a node without the secret cannot pose as one.
//
// CAF's connection itself is not encrypted: this authenticates, it does not hide the traffic
// (run nodes on a trusted network or loopback, as their 127.0.0.1 default does).
#pragma once

#include <cstdint>
#include <deque>
#include <string>

#include "core/status.h"

namespace brigade {

// The secret in `path`: its bytes without trailing whitespace. Errors: unreadable, or shorter
// than 16 bytes. A file that others may read is accepted with a warning in the log.
Expected<std::string> load_node_token(const std::string& path);

// HMAC-SHA256 of `data` under `key` (32 raw bytes).
std::string hmac_sha256(const std::string& key, const std::string& data);

// 32 bytes from the system's cryptographic random generator.
std::string random_nonce();

// What the front proves in its hello, and the node in its answer (raw 32-byte HMAC-SHA256).
std::string hello_proof(const std::string& token, const std::string& challenge, const std::string& instance,
                        const std::string& role);
std::string answer_proof(const std::string& token, const std::string& nonce, const std::string& instance);

// a == b in time that depends on the sizes only.
bool same_proof(const std::string& a, const std::string& b);

// The node's outstanding challenges: each issued one can be redeemed once; past `capacity` the
// oldest is forgotten (a front redeems its challenge right after asking for it).
class ChallengeBook {
 public:
  explicit ChallengeBook(size_t capacity = 64) : capacity_(capacity) {}
  std::string issue();
  // True once per issued challenge (then it is spent).
  bool redeem(const std::string& challenge);
  size_t n_outstanding() const { return outstanding_.size(); }

 private:
  size_t capacity_;
  std::deque<std::string> outstanding_;
};

}  // namespace brigade
