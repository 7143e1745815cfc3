package kubernetes

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// crdTrees are the field trees of the custom resources whose operators'
// Go modules this module cannot use (testdata/crd-fields/README.md).
var crdTrees = map[string]string{
	"cassandra.datastax.com/v1beta1/CassandraDatacenter": "cassandradatacenter.yaml",
	"kafka.strimzi.io/v1beta2/Kafka":                     "kafka.yaml",
	"kafka.strimzi.io/v1beta2/KafkaNodePool":             "kafkanodepool.yaml",
	"kafka.strimzi.io/v1beta2/KafkaTopic":                "kafkatopic.yaml",
}

// k8sTypes are the Go types a tree may name as k8s:<Type>.
var k8sTypes = map[string]func() any{
	"ObjectMeta":                func() any { return &metav1.ObjectMeta{} },
	"ResourceRequirements":      func() any { return &corev1.ResourceRequirements{} },
	"Affinity":                  func() any { return &corev1.Affinity{} },
	"PersistentVolumeClaimSpec": func() any { return &corev1.PersistentVolumeClaimSpec{} },
	"VolumeSource":              func() any { return &corev1.VolumeSource{} },
	"PodTemplateSpec":           func() any { return &corev1.PodTemplateSpec{} },
	"Tolerations":               func() any { return &[]corev1.Toleration{} },
}

func loadTree(key string) (map[string]any, error) {
	file, ok := crdTrees[key]
	if !ok {
		return nil, fmt.Errorf("no CRD field tree for %s", key)
	}
	data, err := os.ReadFile(filepath.Join("testdata", "crd-fields", file))
	if err != nil {
		return nil, err
	}
	var tree map[string]any
	if err := yaml.Unmarshal(data, &tree); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return tree, nil
}

// checkCRDFields walks a custom resource against its field tree and
// reports every field the tree does not allow, by path.
func checkCRDFields(key string, data []byte) error {
	tree, err := loadTree(key)
	if err != nil {
		return err
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		return err
	}
	var errs []string
	walkFields("", doc, tree, &errs)
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

func walkFields(path string, value any, allowed any, errs *[]string) {
	switch a := allowed.(type) {
	case nil: // any value
	case string:
		switch {
		case a == "any":
		case strings.HasPrefix(a, "k8s:"):
			newObj, ok := k8sTypes[strings.TrimPrefix(a, "k8s:")]
			if !ok {
				*errs = append(*errs, fmt.Sprintf("%s: the tree names unknown type %s", path, a))
				return
			}
			data, _ := json.Marshal(value)
			if err := decodeStrict(data, newObj()); err != nil {
				*errs = append(*errs, fmt.Sprintf("%s: %v", path, err))
			}
		default:
			*errs = append(*errs, fmt.Sprintf("%s: the tree has %q: use ~, any or k8s:<Type>", path, a))
		}
	case map[string]any:
		switch v := value.(type) {
		case map[string]any:
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				sub, ok := a[k]
				p := strings.TrimPrefix(path+"."+k, ".")
				if !ok {
					*errs = append(*errs, fmt.Sprintf("unknown field %q", p))
					continue
				}
				walkFields(p, v[k], sub, errs)
			}
		case []any:
			for i, item := range v {
				walkFields(fmt.Sprintf("%s[%d]", path, i), item, a, errs)
			}
		default:
			*errs = append(*errs, fmt.Sprintf("%s: want an object, got %v", path, value))
		}
	default:
		*errs = append(*errs, fmt.Sprintf("%s: bad tree node %v", path, allowed))
	}
}

// Every tree loads, and every kind it covers is one the renders accept.
func TestCRDFieldTreesLoad(t *testing.T) {
	for key := range crdTrees {
		if _, err := loadTree(key); err != nil {
			t.Error(err)
		}
		if f, ok := coreKinds[key]; !ok || f != nil {
			t.Errorf("%s has a field tree but is not listed in coreKinds with a nil type", key)
		}
	}
}

// A misspelt field in a custom resource fails, at any depth the tree lists.
func TestCRDFieldTreeRefusesMisspeltFields(t *testing.T) {
	for _, c := range []struct{ key, doc, want string }{
		{"cassandra.datastax.com/v1beta1/CassandraDatacenter", `{"spec":{"serverVerison":"5.0.4"}}`, `unknown field "spec.serverVerison"`},
		{"cassandra.datastax.com/v1beta1/CassandraDatacenter", `{"spec":{"racks":[{"name":"r1","nodeAffinityLabel":{}}]}}`, `unknown field "spec.racks[0].nodeAffinityLabel"`},
		{"cassandra.datastax.com/v1beta1/CassandraDatacenter", `{"spec":{"resources":{"request":{"cpu":"1"}}}}`, `unknown field "request"`},
		{"kafka.strimzi.io/v1beta2/KafkaTopic", `{"spec":{"partition":12}}`, `unknown field "spec.partition"`},
		{"kafka.strimzi.io/v1beta2/KafkaNodePool", `{"spec":{"storage":{"volumes":[{"sise":"1Gi"}]}}}`, `unknown field "spec.storage.volumes[0].sise"`},
		{"kafka.strimzi.io/v1beta2/Kafka", `{"spec":{"kafka":{"listeners":[{"name":"plain","tsl":false}]}}}`, `unknown field "spec.kafka.listeners[0].tsl"`},
	} {
		err := checkCRDFields(c.key, []byte(c.doc))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s: got %v, want %s", c.key, c.doc, err, c.want)
		}
	}
}
