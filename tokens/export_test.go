package tokens

// NewCL100KEncoder builds a fresh cl100k_base encoder, for tests that
// compare the counter with whole-text encoding.
var NewCL100KEncoder = newCL100K
