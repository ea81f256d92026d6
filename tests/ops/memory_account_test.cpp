// Tests for memory_account: host tensors made under an account_scope are charged and credited
// when freed, an allocation over the limit is refused before it is made, naming the holder, and
// an arena's worker threads charge the account charge_to gives them.
#include "ops/memory_account.hpp"

#include <catch2/catch.hpp>

#include <tbb/parallel_for.h>

#include <vector>

#include "base/result.hpp"
#include "ops/device/device_context.hpp"
#include "ops/tensor.hpp"

using namespace pipeworks;

TEST_CASE("tensors made under an account are charged and credited when freed", "[ops]") {
  auto account = std::make_shared<memory_account>("rank 7", 0);
  {
    account_scope charged(account);
    tensor a({1000}, dtype::f32);  // 4000 bytes, padded to 64
    CHECK(account->in_use() == 4032);
    {
      tensor b = tensor::uninitialized({10}, dtype::f64);
      CHECK(account->in_use() == 4032 + 128);
    }
    CHECK(account->in_use() == 4032);
    CHECK(account->peak() == 4032 + 128);
  }
  CHECK(account->in_use() == 0);
  // Outside any scope nothing is charged.
  tensor c({1000}, dtype::f32);
  CHECK(account->in_use() == 0);
  CHECK(current_account() == nullptr);
}

TEST_CASE("an allocation over the account's limit is refused naming the holder and the limit", "[ops]") {
  auto account = std::make_shared<memory_account>("rank 3 (replica 1, device 1)", 10000);
  account_scope charged(account);
  tensor kept({2000}, dtype::f32);  // 8000 bytes
  try {
    tensor more({1000}, dtype::f32);
    FAIL("an allocation over the limit was made");
  } catch (const pipeworks_error& e) {
    const std::string what = e.what();
    CHECK(what.find("rank 3 (replica 1, device 1)") != std::string::npos);
    CHECK(what.find("over its memory limit of 10000 bytes") != std::string::npos);
    CHECK(what.find("runtime.memory_limit") != std::string::npos);
  }
  CHECK(account->in_use() == 8000);  // the refused allocation took nothing
  tensor fits({400}, dtype::f32);
  CHECK(account->in_use() == 9600);
}

TEST_CASE("a closed account is no longer charged, and a thread naming it forgets it", "[ops]") {
  auto account = std::make_shared<memory_account>("rank 5", 100);
  account_scope charged(account);
  account->close();
  tensor big({1000}, dtype::f32);  // over the limit, but the holder is gone
  CHECK(account->in_use() == 0);
  CHECK(current_account() == nullptr);
}

TEST_CASE("an arena's worker threads charge the account charge_to gives them", "[ops]") {
  auto account = std::make_shared<memory_account>("rank 0", 0);
  device_context cpu = device_context::cpu(2);
  cpu.charge_to(account);
  std::vector<tensor> made(64);
  account_scope charged(account);  // the calling thread's own allocations
  cpu.run([&] {
    tbb::parallel_for(0, 64, [&](int i) { made[static_cast<std::size_t>(i)] = tensor({16}, dtype::f32); });
  });
  CHECK(account->in_use() == 64 * 64);
  made.clear();
  CHECK(account->in_use() == 0);
}
