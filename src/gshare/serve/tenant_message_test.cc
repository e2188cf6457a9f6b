#include "gshare/serve/tenant_message.h"

#include <gtest/gtest.h>

namespace gshare::serve {
namespace {

TEST(TenantMessageTest, InstanceIdsPidsAndNodePathsAreLeftOut) {
  const std::filesystem::path models = "/var/lib/gshare/models/acme";
  EXPECT_EQ(ForTenant("instance 7 of echo (pid 4242) exited with status 3", models),
            "an instance of echo exited with status 3");
  EXPECT_EQ(ForTenant("instance 12 of mlp failed 3 health checks in a row (the last: refused): "
                      "killed",
                      models),
            "an instance of mlp failed 3 health checks in a row (the last: refused): killed");
  EXPECT_EQ(ForTenant("instance 3: pid 99 is gone", models), "an instance: a process is gone");
  EXPECT_EQ(ForTenant("instance instance-1: control channel: the peer closed it", models),
            "an instance: control channel: the peer closed it");
  EXPECT_EQ(ForTenant("opening /var/lib/gshare/run/logs/acme/x.log: denied", models),
            "opening (a node path): denied");
  EXPECT_EQ(ForTenant("model file '/var/lib/gshare/models/acme/w/m.safetensors' is bad", models),
            "model file 'w/m.safetensors' is bad");
  EXPECT_EQ(ForTenant("see its log, logs/acme/echo.log", models),
            "see its log, logs/acme/echo.log");
  EXPECT_EQ(ForTenant("input 'x': shape [2] has 2 elements but data has 3", models),
            "input 'x': shape [2] has 2 elements but data has 3");
  // Not paths: a ratio, a URL; a path that climbs out of the model folder is not inside it.
  EXPECT_EQ(ForTenant("download from https://hf.co/org/model failed; ratio 3 / 4", models),
            "download from https://hf.co/org/model failed; ratio 3 / 4");
  EXPECT_EQ(ForTenant("file /var/lib/gshare/models/acme/w/../../beta/x is bad", models),
            "file (a node path) is bad");
  EXPECT_EQ(ForTenant("PATH=/usr/bin:/var/lib/gshare/run/x; unix://var/run/s and //etc/x", models),
            "PATH=(a node path):(a node path); unix://var/run/s and (a node path)");
  EXPECT_EQ(ForTenant("instances 3 and pids 4 and instance3", models),
            "instances 3 and pids 4 and instance3");
  // Long messages are cut, in time linear in what is kept.
  const std::string long_path = "the function answered 500: /" + std::string(1 << 20, 'a');
  EXPECT_EQ(ForTenant(long_path, models), "the function answered 500: (a node path)...");
  const Status status = ForTenant(Unavailable("instance 1 of e (pid 5) ended"), models);
  EXPECT_EQ(status.code(), StatusCode::kUnavailable);
  EXPECT_EQ(status.message(), "an instance of e ended");
  EXPECT_TRUE(ForTenant(Status::Ok(), models).ok());
}

}  // namespace
}  // namespace gshare::serve
