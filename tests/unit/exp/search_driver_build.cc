// The driver's adapter built into search_test (dl-search and dl-exp each build it too, with
// their own flags), for search_driver_test's replay without Slurm.
#include "exp/search_driver.cc"  // NOLINT(bugprone-suspicious-include)
