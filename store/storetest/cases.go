package storetest

import "testing"

// testCase is one expectation of the contract.
type testCase struct {
	name string
	run  func(t *testing.T, e *env)
}

// cases is the suite, in the order Run runs it.
var cases = []testCase{
	{"AppendKeepsOrder", testAppendKeepsOrder},
	{"AppendNothingIsNoop", testAppendNothing},
	{"AppendTurnIsAtomic", testAppendTurnIsAtomic},
	{"SeqStrictlyIncreasing", testSeqStrictlyIncreasing},
	{"Last", testLast},
	{"LastRejectsNBelowOne", testLastRejectsN},
	{"TailIsSystemPlusNewest", testTail},
	{"TailAfterRemovePrefix", testTailAfterRemovePrefix},
	{"TailRejectsNBelowOne", testTailRejectsN},
	{"TailNeverShowsHalfATurn", testTailWholeTurns},
	{"AppendKeyStoresOnce", testAppendKeyOnce},
	{"AppendKeyRacingStoresOnce", testAppendKeyRacing},
	{"AppendKeyValidated", testAppendKeyValidated},
	{"All", testAll},
	{"Stat", testStat},
	{"StatMany", testStatMany},
	{"RemovePrefix", testRemovePrefix},
	{"RemovePrefixPinsSystemMessages", testRemovePrefixPinsSystem},
	{"Clear", testClear},
	{"Forget", testForget},
	{"ClearVersusForgetAcrossNamespaces", testClearVersusForget},
	{"SeqsNeverReused", testSeqsNeverReused},
	{"StateAbsentIsZero", testStateAbsent},
	{"StateCompareAndSet", testStateCAS},
	{"StateDelete", testStateDelete},
	{"StateVersionsNeverReused", testStateVersionsNeverReused},
	{"ClearDefeatsEarlierCommits", testClearDefeatsCommits},
	{"ClearMarksOneIdentity", testClearMarksOneIdentity},
	{"ClearRacingCommitsLeavesNothingOlder", testClearRacingCommits},
	{"ForgetSparesOtherUsersCommits", testForgetSparesOthers},
	{"StateValuesAreBytes", testStateBytes},
	{"StateNamesValidated", testStateNames},
	{"StateIsolated", testStateIsolated},
	{"IdentitiesIsolated", testIdentitiesIsolated},
	{"ForgetAdversarialIdentities", testForgetAdversarial},
	{"MessageTypesRoundTrip", testMessageTypesRoundTrip},
	{"TextRoundTripsByteForByte", testTextRoundTrip},
	{"OneMegabyteMessage", testOneMegabyte},
	{"ReturnedMessagesAreCopies", testCopies},
	{"TimeFromContext", testTimeFromContext},
	{"TimeDefaultsToNow", testTimeDefaultsToNow},
	{"TimeSharedByTurn", testTimeSharedByTurn},
	{"TimeSurvivesRemovePrefix", testTimeSurvivesRemovePrefix},
	{"TimeUnstorable", testTimeUnstorable},
	{"ConcurrentWritersLoseNothing", testConcurrentWriters},
	{"TwoClientsLoseNothing", testTwoClients},
	{"TwoClientsStateCompareAndSet", testTwoClientsState},
	{"CancelledContext", testCancelledContext},
	{"CancelWhileInFlight", testCancelInFlight},
	{"Rewrite", testRewrite},
	{"RewriteIsAtomic", testRewriteAtomic},
	{"UsersIdentities", testUsersIdentities},
	{"UsersExport", testUsersExport},
	{"UsersForget", testUsersForget},
	{"SurvivesReopen", testSurvivesReopen},
	{"ClosedStoreReturnsErrors", testClosedStore},
}
