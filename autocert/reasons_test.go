package autocert

import (
	"testing"

	"github.com/object-store-operator/operator/internal/reason/reasontest"
)

func TestEveryReasonIsListedWithItsSeverityAndRemedy(t *testing.T) {
	reasontest.AllListed(t, ".", Reasons(), "Reason")
}
