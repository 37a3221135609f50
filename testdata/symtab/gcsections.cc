// Functions the linker drops (-ffunction-sections, --gc-sections): their
// line sequences stay in the unit's line table at address 0, overlapping
// one another. unused_one and unused_two are never called; inlined is
// inlined into main, so its own copy is dropped too.
#include <cstdio>

int unused_one(int v) { return v * 7 + 1; }
int unused_two(int v) { return v * 11 + 2; }
int inlined(int v) { return v + 5; }

int main(int argc, char **) {
	std::printf("%d\n", inlined(argc));
	return 0;
}
