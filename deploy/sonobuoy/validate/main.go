// Command validate checks the gpuconf Sonobuoy plugin with Sonobuoy's own code (v0.57.3):
//
//	validate plugin FILE          decode FILE as `sonobuoy run --plugin FILE` does (and once more
//	                              strictly, so a misspelt field is an error), build the Job
//	                              driver, and print the plugin pod that driver renders (JSON)
//	validate results FILE DIR     read DIR/done as the Sonobuoy worker does, unpack the result
//	                              it names as the aggregator does, post-process it with the
//	                              plugin's result-format, and print the result tree (JSON)
//	validate gojson FILE          read FILE (a `go test -json` stream) with Sonobuoy's gojson
//	                              result reader and print the result tree (JSON)
//
// It is the project's test harness (tests/unit/test_sonobuoy_plugin.py), not part of the image.
package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vmware-tanzu/sonobuoy/pkg/client/results"
	"github.com/vmware-tanzu/sonobuoy/pkg/plugin"
	"github.com/vmware-tanzu/sonobuoy/pkg/plugin/driver/job"
	"github.com/vmware-tanzu/sonobuoy/pkg/plugin/loader"
	"github.com/vmware-tanzu/sonobuoy/pkg/plugin/manifest"
	"github.com/vmware-tanzu/sonobuoy/pkg/tarball"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/yaml"
)

const namespace = "sonobuoy"

func main() {
	if len(os.Args) < 3 {
		fail("usage: validate plugin FILE | validate results FILE RESULTS_DIR | validate gojson FILE")
	}
	if os.Args[1] == "gojson" {
		item, err := results.GojsonProcessFile(filepath.Dir(os.Args[2]), os.Args[2])
		if err != nil {
			fail(err.Error())
		}
		emit(item)
		return
	}
	def := load(os.Args[2])
	switch os.Args[1] {
	case "plugin":
		render(def)
	case "results":
		if len(os.Args) != 4 {
			fail("usage: validate results FILE RESULTS_DIR")
		}
		process(def, os.Args[3])
	default:
		fail("unknown command " + os.Args[1])
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "validate: "+msg)
	os.Exit(1)
}

// load decodes the plugin as `sonobuoy run --plugin FILE` does, then strictly.
func load(file string) manifest.Manifest {
	def, err := loader.LoadDefinitionFromFile(file)
	if err != nil {
		fail(err.Error())
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		fail(err.Error())
	}
	var strict manifest.Manifest
	if err := yaml.UnmarshalStrict(raw, &strict); err != nil {
		fail("strict decode: " + err.Error())
	}
	if !strings.EqualFold(def.SonobuoyConfig.Driver, "job") {
		fail("driver must be Job, got " + def.SonobuoyConfig.Driver)
	}
	switch def.SonobuoyConfig.ResultFormat {
	case results.ResultFormatJUnit, results.ResultFormatE2E, results.ResultFormatGoJSON,
		results.ResultFormatRaw, results.ResultFormatManual:
	default:
		fail("unknown result-format " + def.SonobuoyConfig.ResultFormat)
	}
	return *def
}

// render runs the Job driver against a fake clientset and prints the pod it creates.
func render(def manifest.Manifest) {
	p := job.NewPlugin(def, namespace, "sonobuoy/sonobuoy:v0.57.3", "IfNotPresent", "", nil)
	client := fake.NewSimpleClientset()
	owner := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "sonobuoy", Namespace: namespace,
		UID: "00000000-0000-0000-0000-000000000000"}}
	if err := p.Run(client, "sonobuoy-aggregator:8080", selfSigned(), owner, "8099",
		"/tmp/sonobuoy/results"); err != nil {
		fail("job driver: " + err.Error())
	}
	pods, err := client.CoreV1().Pods(namespace).List(context.TODO(), metav1.ListOptions{})
	if err != nil || len(pods.Items) != 1 {
		fail(fmt.Sprintf("job driver created %d pods (%v)", len(pods.Items), err))
	}
	out := map[string]any{"name": p.GetName(), "driver": p.GetDriver(),
		"resultFormat": p.GetResultFormat(), "pod": pods.Items[0]}
	emit(out)
}

// process does what the worker and the aggregator do with a finished plugin.
func process(def manifest.Manifest, dir string) {
	done, err := os.ReadFile(filepath.Join(dir, "done"))
	if err != nil {
		fail("no done file: " + err.Error())
	}
	resultFile := string(bytes.TrimSpace(done))
	base, err := os.MkdirTemp("", "sonobuoy-results")
	if err != nil {
		fail(err.Error())
	}
	defer os.RemoveAll(base)
	p := job.NewPlugin(def, namespace, "", "", "", nil)
	r := plugin.Result{ResultType: p.GetName(), NodeName: plugin.GlobalResult}
	target := filepath.Join(base, results.PluginsDir, r.Path())
	f, err := os.Open(resultFile)
	if err != nil {
		fail("the done file names " + resultFile + ": " + err.Error())
	}
	defer f.Close()
	if strings.HasSuffix(resultFile, ".tar.gz") || strings.HasSuffix(resultFile, ".tgz") {
		if err := tarball.DecodeTarball(f, target); err != nil {
			fail("decode tarball: " + err.Error())
		}
	} else {
		if err := os.MkdirAll(target, 0o755); err != nil {
			fail(err.Error())
		}
		body, _ := os.ReadFile(resultFile)
		if err := os.WriteFile(filepath.Join(target, filepath.Base(resultFile)), body, 0o644); err != nil {
			fail(err.Error())
		}
	}
	item, errs := results.PostProcessPlugin(p, base)
	if len(errs) > 0 {
		fail(fmt.Sprintf("post-processing: %v", errs))
	}
	var files []string
	_ = filepath.Walk(target, func(path string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			rel, _ := filepath.Rel(target, path)
			files = append(files, rel)
		}
		return nil
	})
	emit(map[string]any{"item": item, "files": files})
}

func emit(v any) {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		fail(err.Error())
	}
}

func selfSigned() *tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		fail(err.Error())
	}
	tmpl := x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "x"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, &tmpl, &key.PublicKey, key)
	if err != nil {
		fail(err.Error())
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
