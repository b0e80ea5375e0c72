// The front's side of the node hello (actors/node/node_actor.h): the NodeHello built from what
// the node's (info) answer said, and the checks of that answer and of the hello's reply,
// including authentication (actors/node/node_auth.h). Used by the Engine at start and by the
// node watch when a node comes back.
#pragma once

#include <string>

#include "core/status.h"
#include "messages/types.h"

namespace brigade {

// Who the front is to one node.
struct FrontIdentity {
  std::string front;     // names the front in the node's logs
  std::string instance;  // the instance its topology gives this endpoint
  std::string role;
  std::string token;     // the topology's node token; empty: no authentication
};

// A hello for a node whose latest (info) answer is `info`; `nonce` receives the front's nonce,
// which check_hello_answer needs. Refuses a node whose authentication does not match the
// front's: it wants a token the front has not, or has none while the front has one (the front
// then cannot tell it from an impostor).
Expected<node_hello_msg> make_node_hello(const FrontIdentity& who, schema::NodeInfo::Reader info, std::string& nonce);

// The hello's reply: with a token, the node must prove it over `nonce`.
Status check_hello_answer(const FrontIdentity& who, const std::string& nonce, schema::NodeInfo::Reader answer);

}  // namespace brigade
