package oci

import (
	"os"
	"testing"

	"github.com/dbfork/dbfork/internal/testenv"
)

// -short: the artifact format, unpacking and its refusals; not the real
// registry (a CNCF distribution built from source) and real servers.
func TestMain(m *testing.M) {
	os.Exit(testenv.RunTiers(m, `^(TestPlanLayers|TestLayerDeterministic|TestCheckFilesRefusesEscapes|TestReapPushDirs|TestUnpackParallelSpans|TestUnpackRefusesBadLayers|TestUnpackWriterFailure|TestRegistryCredentialsStayWithTheirHost|TestExportIsPrivate|TestUnpackRefusesOversize)$`, ""))
}
