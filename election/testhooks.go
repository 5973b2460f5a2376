package election

// testHooks are an Elector's test signals: the package's own tests set them on
// the Elector they watch before it starts (or, for retryWait, before anything
// they are about can reach it); everywhere else they are nil. On the instance,
// not package globals, so that tests running several Electors hook only the
// one they mean.
type testHooks struct {
	// retryWait runs when retryEnded starts waiting for the locks of names
	// (in a leadDo request, on leadLoop: see locks.go).
	retryWait func(names []string)
	// claimReturned runs between a claim's return and the delivery of its
	// outcome: a test holds a claim "in flight" there.
	claimReturned func(sc *Scope, r claimResult)
}
