// The one Catch2 include of the test suites (Debian ships v2.13; a move to v3 changes this file).
#pragma once

#include <catch2/catch.hpp>

using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;
