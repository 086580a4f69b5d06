// The LoRA registry (engine/lora_adapters.h): two-phase loads (reserve → activate or
// cancel), the lowest free slot, slot reuse after unload, ids never reused, user counts
// that keep an adapter from being removed, and reserved adapters invisible to requests.
#include <gtest/gtest.h>

#include "engine/lora_adapters.h"

namespace tandem {
namespace lora_adapters_test {

LoraRefusal refusal_of(LoraAdapters& r, const std::string& name) {
  try {
    r.reserve(name, "/dir/" + name);
  } catch (const LoraLoadError& e) {
    return e.why();
  }
  ADD_FAILURE() << "reserve('" << name << "') was not refused";
  return LoraRefusal::BadAdapter;
}

TEST(LoraAdapters, ReservedIsInvisibleUntilActivated) {
  LoraAdapters r(2);
  LoraAdapter a = r.reserve("a", "/dir/a");
  EXPECT_EQ(a.slot, 1);
  EXPECT_FALSE(r.acquire("a").has_value());
  EXPECT_TRUE(r.list().empty());
  EXPECT_EQ(r.remove("a"), LoraRemoval::NotFound);  // not loaded yet
  EXPECT_EQ(refusal_of(r, "a"), LoraRefusal::NameTaken);
  r.activate("a");
  ASSERT_EQ(r.list().size(), 1u);
  EXPECT_EQ(r.list()[0].dir, "/dir/a");
  std::optional<LoraUse> use = r.acquire("a");
  ASSERT_TRUE(use.has_value());
  EXPECT_EQ(use->slot, 1);
  EXPECT_EQ(use->id, a.id);
}

TEST(LoraAdapters, CancelGivesTheNameAndSlotBack) {
  LoraAdapters r(1);
  LoraAdapter a = r.reserve("a", "/dir/a");
  EXPECT_EQ(refusal_of(r, "b"), LoraRefusal::NoFreeSlot);
  r.cancel("a");
  LoraAdapter b = r.reserve("b", "/dir/b");
  EXPECT_EQ(b.slot, 1);
  EXPECT_NE(b.id, a.id);
  r.activate("b");
  r.cancel("b");  // an active adapter is not cancelled
  EXPECT_TRUE(r.acquire("b").has_value());
}

TEST(LoraAdapters, UsersKeepAnAdapterLoaded) {
  LoraAdapters r(2);
  r.reserve("a", "/dir/a");
  r.activate("a");
  LoraUse u1 = *r.acquire("a");
  LoraUse u2 = *r.acquire("a");
  EXPECT_EQ(r.list()[0].num_users, 2);
  EXPECT_EQ(r.remove("a"), LoraRemoval::InUse);
  r.release(u1);
  EXPECT_EQ(r.remove("a"), LoraRemoval::InUse);
  r.release(u2);
  EXPECT_EQ(r.remove("a"), LoraRemoval::Removed);
  EXPECT_EQ(r.remove("a"), LoraRemoval::NotFound);
  EXPECT_FALSE(r.acquire("a").has_value());
}

TEST(LoraAdapters, UnloadFreesTheLowestSlotAndIdsAreNeverReused) {
  LoraAdapters r(3);
  std::vector<uint64_t> ids;
  for (const char* n : {"a", "b", "c"}) {
    ids.push_back(r.reserve(n, "/dir").id);
    r.activate(n);
  }
  EXPECT_EQ(refusal_of(r, "d"), LoraRefusal::NoFreeSlot);
  EXPECT_EQ(r.remove("b"), LoraRemoval::Removed);
  LoraAdapter again = r.reserve("b", "/dir/b2");  // the same name, loaded anew
  EXPECT_EQ(again.slot, 2);
  for (uint64_t id : ids) EXPECT_NE(again.id, id);  // the prefix cache never mixes the two
  r.activate("b");
  EXPECT_EQ(r.acquire("b")->id, again.id);
  // A release for the unloaded adapter (same name, old id) touches nothing.
  r.release(LoraUse{.slot = 2, .id = ids[1]});
  EXPECT_EQ(r.list()[1].num_users, 1);
}

TEST(LoraAdapters, RefusalsSayWhy) {
  LoraAdapters none(0);
  EXPECT_EQ(refusal_of(none, "a"), LoraRefusal::NoCapacity);
  LoraAdapters r(1);
  EXPECT_EQ(refusal_of(r, ""), LoraRefusal::BadName);
}

}  // namespace lora_adapters_test
}  // namespace tandem
