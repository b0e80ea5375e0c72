// convert.h helpers and the Status <-> caf::error mapping (error.h).
#include <gtest/gtest.h>

#include <caf/sec.hpp>

#include "messages/convert.h"
#include "messages/error.h"
#include "messages/types.h"

namespace brigade {
namespace {

TEST(Convert, ListsRoundTrip) {
  const std::vector<int32_t> ids{5, -1, 2147483647};
  const std::vector<uint64_t> released{1, 1ull << 40};
  auto plan = step_plan_msg::build([&](schema::StepPlan::Builder b) {
    fill_list(b.initSeqs(1)[0].initTokens(static_cast<unsigned>(ids.size())), ids);
    fill_list(b.initReleased(static_cast<unsigned>(released.size())), released);
  });
  EXPECT_EQ(to_vector(plan->getSeqs()[0].getTokens()), ids);
  EXPECT_EQ(to_vector(plan->getReleased()), released);
  EXPECT_TRUE(to_vector(plan->getSeqs()[0].getBlockTable()).empty());
}

TEST(Convert, SizeMismatchIsABug) {
  const std::vector<int32_t> ids{1, 2, 3};
  EXPECT_DEATH(step_plan_msg::build([&](schema::StepPlan::Builder b) {
    fill_list(b.initSeqs(1)[0].initTokens(2), ids);
  }),
               "another size");
}

TEST(Convert, TextViewsAndLists) {
  auto request = generate_request_msg::build([](schema::GenerateRequest::Builder b) {
    b.getPrompt().setText("hi there");
    auto strings = b.initStop().initStrings(2);
    strings.set(0, "");
    strings.set(1, "stop");
  });
  EXPECT_EQ(to_string_view(request->getPrompt().getText()), "hi there");
  EXPECT_EQ(to_vector(request->getStop().getStrings()), (std::vector<std::string>{"", "stop"}));
}

TEST(Error, StatusRoundTripsThroughCafError) {
  for (auto code : {StatusCode::invalid_argument, StatusCode::corrupt, StatusCode::out_of_resources,
                    StatusCode::internal}) {
    const Status original(code, "what went wrong");
    const caf::error error = to_caf_error(original);
    ASSERT_TRUE(error);
    EXPECT_EQ(error.category(), error_category);
    const Status back = to_status(error);
    EXPECT_EQ(back.code(), code);
    EXPECT_EQ(back.message(), "what went wrong");
  }
  EXPECT_FALSE(to_caf_error(Status::ok()));
  EXPECT_TRUE(to_status(caf::error()).is_ok());
}

TEST(Error, ForeignErrorsAreInternal) {
  const Status status = to_status(caf::make_error(caf::sec::request_timeout));
  EXPECT_EQ(status.code(), StatusCode::internal);
  EXPECT_NE(status.message().find("request_timeout"), std::string::npos) << status.message();
}

TEST(Error, Renders) {
  EXPECT_EQ(render_error(static_cast<uint8_t>(StatusCode::corrupt), error_category,
                         caf::make_message(std::string("bad bytes"))),
            "corrupt: bad bytes");
  EXPECT_NE(render_error(200, error_category, caf::message()).find("unknown"), std::string::npos);
}

}  // namespace
}  // namespace brigade
