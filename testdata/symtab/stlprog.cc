// Test target for symtab: the STL (maps, hash maps, regex, streams), for
// deep inlining through libstdc++ headers.
#include <iostream>
#include <map>
#include <vector>
#include <string>
#include <regex>
#include <unordered_map>
#include <sstream>
int main(int argc, char** argv) {
  std::map<std::string, std::vector<int>> m;
  std::unordered_map<int, std::string> u;
  std::regex re("a+b*");
  for (int i = 0; i < argc * 100; i++) { m[std::to_string(i)].push_back(i); u[i] = std::to_string(i * 2); }
  std::stringstream ss; ss << m.size() << u.size() << std::regex_match("aab", re);
  std::cout << ss.str() << std::endl;
}
