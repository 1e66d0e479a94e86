package node

import (
	"testing"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// SpendLogs and the NodeLogs it sends to other nodes build their ledger
// query in ledgerQuery: the model and errors filters must reach it.
func TestLedgerQueryCarriesModelAndErrorsFilters(t *testing.T) {
	q := ledgerQuery(&pb.SpendLogsRequest{KeyId: "k", TeamId: "t", Model: "gpt-4o", ErrorsOnly: true, Limit: 7})
	if q.Model != "gpt-4o" || !q.ErrorsOnly || q.KeyID != "k" || q.TeamID != "t" || q.Limit != 7 {
		t.Fatalf("ledger query %+v", q)
	}
}
