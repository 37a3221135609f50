// Test target for symtab: the STL (maps, hash maps, sets, strings,
// streams, algorithms, shared pointers, std::function), for deep inlining
// through libstdc++ headers.
#include <algorithm>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

struct Item {
  std::string name;
  int weight;
  bool operator<(const Item &o) const { return weight < o.weight || (weight == o.weight && name < o.name); }
};

int main(int argc, char **argv) {
  std::map<std::string, std::vector<int>> m;
  std::unordered_map<int, std::string> u;
  std::set<Item> items;
  std::vector<std::shared_ptr<Item>> ptrs;
  std::function<int(const Item &)> score = [&](const Item &it) { return it.weight * argc + (int)it.name.size(); };
  for (int i = 0; i < argc * 100; i++) {
    m[std::to_string(i)].push_back(i);
    u[i] = std::to_string(i * 2);
    items.insert(Item{u[i], i % 7});
    ptrs.push_back(std::make_shared<Item>(Item{std::to_string(i), i}));
  }
  std::sort(ptrs.begin(), ptrs.end(), [](const auto &a, const auto &b) { return a->name < b->name; });
  long total = 0;
  for (const auto &it : items) total += score(it);
  std::stringstream ss;
  ss << m.size() << ' ' << u.size() << ' ' << total << ' ' << ptrs.front()->name;
  std::string s = ss.str();
  std::cout << s << ' ' << std::count(s.begin(), s.end(), '1') << std::endl;
}
