#include "kv/kv_groups.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace tandem {
namespace kv_groups_test {

TEST(KvGroups, FullLayersOnlyMakeOneGroup) {
  std::vector<KvLayerKind> layers(4, KvLayerKind{0});
  KvGroups g = make_kv_groups(layers);
  ASSERT_EQ(g.num_groups(), 1);
  EXPECT_FALSE(g.groups[0].sliding());
  EXPECT_EQ(g.groups[0].layers, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(g.layer_group, (std::vector<int>{0, 0, 0, 0}));
}

TEST(KvGroups, GemmaPatternIsFullGroupThenWindowGroup) {
  // Gemma 3: five sliding layers, then a full one.
  std::vector<KvLayerKind> layers;
  for (int i = 0; i < 12; i++) layers.push_back({(i + 1) % 6 ? 1024 : 0});
  KvGroups g = make_kv_groups(layers);
  ASSERT_EQ(g.num_groups(), 2);
  EXPECT_EQ(g.groups[0].window, 0);
  EXPECT_EQ(g.groups[0].layers, (std::vector<int>{5, 11}));
  EXPECT_EQ(g.groups[1].window, 1024);
  EXPECT_EQ(g.groups[1].layers.size(), 10u);
  EXPECT_EQ(g.layer_group[4], 1);
  EXPECT_EQ(g.layer_group[5], 0);
}

TEST(KvGroups, SlidingOnlyModelIsOneWindowGroup) {
  std::vector<KvLayerKind> layers(3, KvLayerKind{4096});  // Mistral
  KvGroups g = make_kv_groups(layers);
  ASSERT_EQ(g.num_groups(), 1);
  EXPECT_EQ(g.groups[0].window, 4096);
  EXPECT_TRUE(g.groups[0].sliding());
}

TEST(KvGroups, DistinctWindowsGetTheirOwnGroupsSmallestFirst) {
  std::vector<KvLayerKind> layers{{512}, {0}, {128}, {512}};
  KvGroups g = make_kv_groups(layers);
  ASSERT_EQ(g.num_groups(), 3);
  EXPECT_EQ(g.groups[1].window, 128);
  EXPECT_EQ(g.groups[2].window, 512);
  EXPECT_EQ(g.layer_group, (std::vector<int>{2, 0, 1, 2}));
  EXPECT_EQ(g.groups[2].layers, (std::vector<int>{0, 3}));
}

TEST(KvGroups, SharingLayersJoinTheirSourceAndOwnNoStorage) {
  // Gemma 3n/4: the last layers read the KV of the last layer of their kind.
  std::vector<KvLayerKind> layers{{64}, {0}, {64, 0}, {0, 1}};
  KvGroups g = make_kv_groups(layers);
  ASSERT_EQ(g.num_groups(), 2);
  EXPECT_EQ(g.groups[0].layers, (std::vector<int>{1}));
  EXPECT_EQ(g.groups[1].layers, (std::vector<int>{0}));
  EXPECT_EQ(g.layer_group, (std::vector<int>{1, 0, 1, 0}));
}

TEST(KvGroups, SharingLayerMaySeeLessThanItsSourceKeeps) {
  std::vector<KvLayerKind> layers{{0}, {64, 0}};
  KvGroups g = make_kv_groups(layers);
  ASSERT_EQ(g.num_groups(), 1);  // no layer owns window storage
  EXPECT_EQ(g.layer_group, (std::vector<int>{0, 0}));
}

TEST(KvGroups, RejectsSharingThatWouldReadReleasedBlocks) {
  std::vector<KvLayerKind> full_reads_window{{64}, {0, 0}};
  EXPECT_THROW(make_kv_groups(full_reads_window), Error);
  std::vector<KvLayerKind> wider_window{{64}, {128, 0}};
  EXPECT_THROW(make_kv_groups(wider_window), Error);
  std::vector<KvLayerKind> chain{{0}, {0, 0}, {0, 1}};
  EXPECT_THROW(make_kv_groups(chain), Error);
  std::vector<KvLayerKind> out_of_range{{0, 5}};
  EXPECT_THROW(make_kv_groups(out_of_range), Error);
  EXPECT_THROW(make_kv_groups(std::vector<KvLayerKind>{}), Error);
}

}  // namespace kv_groups_test
}  // namespace tandem
