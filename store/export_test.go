package store

// ChainDrafts is chainDrafts for the benchmarks of package store_test.
var ChainDrafts = chainDrafts
