#include "actors/node/front_hello.h"

#include "actors/node/node_actor.h"
#include "actors/node/node_auth.h"
#include "messages/convert.h"

namespace brigade {

Expected<node_hello_msg> make_node_hello(const FrontIdentity& who, schema::NodeInfo::Reader info, std::string& nonce) {
  const std::string where = "instance '" + who.instance + "'";
  if (info.getAuthRequired() && who.token.empty())
    return invalid_argument(where + ": its node requires authentication; set node_token_file in the front's topology "
                            "to the node's token file");
  if (!info.getAuthRequired() && !who.token.empty())
    return invalid_argument(where + ": its node does not authenticate, while this topology sets node_token_file; "
                            "start the node with the same topology (a node without the token could be anyone)");
  nonce = who.token.empty() ? std::string() : random_nonce();
  const std::string challenge = to_string(info.getChallenge());
  const std::string proof = who.token.empty() ? std::string() : hello_proof(who.token, challenge, who.instance, who.role);
  return node_hello_msg::build([&](schema::NodeHello::Builder b) {
    b.setProtocol(kNodeProtocol);
    b.setFront(who.front);
    b.setInstance(who.instance);
    b.setRole(who.role);
    b.setChallenge(as_data(challenge));
    b.setProof(as_data(proof));
    b.setNonce(as_data(nonce));
  });
}

Status check_hello_answer(const FrontIdentity& who, const std::string& nonce, schema::NodeInfo::Reader answer) {
  if (who.token.empty()) return Status::ok();
  if (!same_proof(to_string(answer.getProof()), answer_proof(who.token, nonce, who.instance)))
    return invalid_argument("instance '" + who.instance + "': the node did not prove the node token; it is not "
                            "the node this topology names (or its token file differs)");
  return Status::ok();
}

}  // namespace brigade
