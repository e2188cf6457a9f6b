#include "gshare/common/status.h"

#include <gtest/gtest.h>

namespace gshare {
namespace {

Result<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgument("odd");
  return x / 2;
}

Result<int> Quarter(int x) {
  GSHARE_ASSIGN_OR_RETURN(int half, Half(x));
  GSHARE_ASSIGN_OR_RETURN(int quarter, Half(half));
  return quarter;
}

Status CheckEven(int x) {
  GSHARE_RETURN_IF_ERROR(Half(x).status());
  return Status::Ok();
}

TEST(StatusTest, OkAndErrors) {
  EXPECT_TRUE(Status::Ok().ok());
  const Status s = NotFound("no such function 'x'");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.ToString(), "NotFound: no such function 'x'");
  EXPECT_EQ(s.WithContext("loading").ToString(), "NotFound: loading: no such function 'x'");
  EXPECT_EQ(Status::Ok().WithContext("x").ToString(), "OK");
}

TEST(StatusTest, ResultPropagatesErrors) {
  EXPECT_EQ(*Quarter(8), 2);
  const auto odd = Quarter(6);
  ASSERT_FALSE(odd.ok());
  EXPECT_EQ(odd.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(CheckEven(4).ok());
  EXPECT_EQ(CheckEven(3).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gshare
