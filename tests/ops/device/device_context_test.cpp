// device_context on the CPU: with threads it runs work inside a oneTBB arena of that many
// threads; with none, on the caller's own threads.
#include <catch2/catch.hpp>
#include <tbb/task_arena.h>

#include <thread>

#include "ops/device/device_context.hpp"

using namespace pipeworks;

TEST_CASE("a CPU device context runs work in an arena of its threads", "[ops][device]") {
  device_context two = device_context::cpu(2);
  CHECK(two.where() == device::cpu());
  CHECK(two.threads() == 2);
  int seen = 0;
  std::thread::id ran_on;
  two.run([&] {
    seen = tbb::this_task_arena::max_concurrency();
    ran_on = std::this_thread::get_id();
  });
  CHECK(seen == 2);
  CHECK(ran_on == std::this_thread::get_id());  // execute joins the arena from this thread

  device_context one = device_context::cpu(1);
  one.run([&] { seen = tbb::this_task_arena::max_concurrency(); });
  CHECK(seen == 1);
}

TEST_CASE("a CPU device context without threads runs work on the caller's", "[ops][device]") {
  device_context none = device_context::cpu(0);
  CHECK(none.threads() == 0);
  int outside = tbb::this_task_arena::max_concurrency(), inside = -1;
  none.run([&] { inside = tbb::this_task_arena::max_concurrency(); });
  CHECK(inside == outside);
  device_context moved = std::move(none);
  bool ran = false;
  moved.run([&] { ran = true; });
  CHECK(ran);
}

TEST_CASE("a GPU device context is refused by name where the GPU cannot be had", "[ops][device]") {
  const gpu_census gpus = find_gpus();
  // A GPU number past the last one is always refused, naming it.
  CHECK_THROWS_WITH(device_context::cuda(gpus.count + 3),
                    Catch::Contains("cuda:" + std::to_string(gpus.count + 3)));
  if (gpus.count == 0) {
    CHECK_THROWS_WITH(device_context::cuda(0), Catch::Contains("cuda:0 cannot be used: " + gpus.why) &&
                                                   Catch::Contains("--device cpu"));
  } else {
    device_context g = device_context::cuda(0);
    CHECK(g.where() == parse_device("cuda:0").value());
    CHECK(g.gpu() != nullptr);
  }
}
