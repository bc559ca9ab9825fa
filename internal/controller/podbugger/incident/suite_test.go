package incident_test

import (
	"testing"

	"github.com/deckhand-dev/deckhand/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }
