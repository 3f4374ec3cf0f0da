#include "sim/strategies/strategy.hpp"
