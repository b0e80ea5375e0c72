#include "actors/node/front_hello.h"

#include "actors/node/node_actor.h"
#include "actors/node/node_auth.h"

namespace brigade {

namespace {

std::string bytes_of(capnp::Data::Reader d) { return std::string(reinterpret_cast<const char*>(d.begin()), d.size()); }

capnp::Data::Reader data_of(const std::string& s) {
  return capnp::Data::Reader(reinterpret_cast<const kj::byte*>(s.data()), s.size());
}

}  // namespace

Expected<node_hello_msg> make_node_hello(const FrontIdentity& who, schema::NodeInfo::Reader info, std::string& nonce) {
  const std::string where = "instance '" + who.instance + "'";
  if (info.getAuthRequired() && who.token.empty())
    return invalid_argument(where + ": its node requires authentication; set node_token_file in the front's topology "
                            "to the node's token file");
  if (!info.getAuthRequired() && !who.token.empty())
    return invalid_argument(where + ": its node does not authenticate, while this topology sets node_token_file; "
                            "start the node with the same topology (a node without the token could be anyone)");
  nonce = who.token.empty() ? std::string() : random_nonce();
  const std::string challenge = bytes_of(info.getChallenge());
  const std::string proof = who.token.empty() ? std::string() : hello_proof(who.token, challenge, who.instance, who.role);
  return node_hello_msg::build([&](schema::NodeHello::Builder b) {
    b.setProtocol(kNodeProtocol);
    b.setFront(who.front);
    b.setInstance(who.instance);
    b.setRole(who.role);
    b.setChallenge(data_of(challenge));
    b.setProof(data_of(proof));
    b.setNonce(data_of(nonce));
  });
}

Status check_hello_answer(const FrontIdentity& who, const std::string& nonce, schema::NodeInfo::Reader answer) {
  if (who.token.empty()) return Status::ok();
  if (!same_proof(bytes_of(answer.getProof()), answer_proof(who.token, nonce, who.instance)))
    return invalid_argument("instance '" + who.instance + "': the node did not prove the node token; it is not "
                            "the node this topology names (or its token file differs)");
  return Status::ok();
}

}  // namespace brigade
