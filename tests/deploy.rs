//! The Kubernetes manifests under deploy/kubernetes are checked the way a
//! cluster would check them — against the Kubernetes schemas, strictly, by
//! `kubernetes-validate` from PyPI (deploy/kubernetes/validate) — and
//! against myquic itself: the config each ConfigMap carries passes
//! `--check-config`, and probes and Service ports agree with it. Broken
//! copies of the manifests must be rejected, so the check can fail.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs the validator on `files` (all manifests when empty).
fn validate(files: &[&Path]) -> (bool, String) {
    let out = Command::new(repo().join("deploy/kubernetes/validate"))
        .args(files)
        .env("MYQUIC_BIN", env!("CARGO_BIN_EXE_myquic"))
        .output()
        .expect("running deploy/kubernetes/validate (needs python3 with venv)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{text}");
    (out.status.success(), text)
}

/// A copy of `manifest` with `from` replaced by `to`.
fn broken(dir: &Path, manifest: &str, from: &str, to: &str) -> PathBuf {
    let text = std::fs::read_to_string(repo().join("deploy/kubernetes").join(manifest)).unwrap();
    assert!(
        text.contains(from),
        "{manifest} no longer contains {from:?}"
    );
    let path = dir.join(format!("broken-{}", manifest));
    std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
    path
}

#[test]
fn manifests_are_valid_and_agree_with_myquic() {
    let (ok, text) = validate(&[]);
    assert!(ok, "the manifests must validate:\n{text}");
    assert!(
        text.contains("resources in 2 files"),
        "both manifests were read"
    );
}

#[test]
fn broken_manifests_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    // A misspelt field: the strict schema refuses it.
    let typo = broken(
        dir.path(),
        "sidecar.yaml",
        "restartPolicy: Always",
        "restartPolicyy: Always",
    );
    let (ok, text) = validate(&[&typo]);
    assert!(
        !ok && text.contains("restartPolicyy"),
        "schema error expected:\n{text}"
    );

    // A sidecar that would not outlive the app's start: not a native sidecar.
    let plain = broken(
        dir.path(),
        "sidecar.yaml",
        "restartPolicy: Always",
        "restartPolicy: OnFailure",
    );
    let (ok, text) = validate(&[&plain]);
    assert!(!ok && text.contains("restartPolicy Always"), "{text}");

    // A config myquic itself rejects.
    let config = broken(
        dir.path(),
        "gateway.yaml",
        "listen = \"0.0.0.0:8443\"",
        "listen = \"0.0.0.0\"",
    );
    let (ok, text) = validate(&[&config]);
    assert!(!ok && text.contains("rejected by myquic"), "{text}");

    // A probe on a port that is not the admin endpoint.
    let probe = broken(
        dir.path(),
        "gateway.yaml",
        "httpGet: {path: /ready, port: admin}",
        "httpGet: {path: /ready, port: 8443}",
    );
    let (ok, text) = validate(&[&probe]);
    assert!(!ok && text.contains("readinessProbe port 8443"), "{text}");

    // A grace period shorter than the drain: the kubelet would kill it
    // mid-drain, cutting transactions the drain promised to let finish.
    let grace = broken(
        dir.path(),
        "sidecar.yaml",
        "terminationGracePeriodSeconds: 45",
        "terminationGracePeriodSeconds: 20",
    );
    let (ok, text) = validate(&[&grace]);
    assert!(!ok && text.contains("killed mid-drain"), "{text}");

    // The Service's UDP port pointing at a port the pod does not open.
    let udp = broken(
        dir.path(),
        "gateway.yaml",
        "{name: h3, port: 8443, targetPort: h3, protocol: UDP}",
        "{name: h3, port: 8443, targetPort: 9443, protocol: UDP}",
    );
    let (ok, text) = validate(&[&udp]);
    assert!(!ok && text.contains("port h3 targets"), "{text}");
}

/// The gateway scales out as a tier: each way of losing that is refused.
#[test]
fn manifests_that_do_not_scale_out_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    for (from, to, complaint) in [
        // One replica: nothing to fail over to.
        ("minReplicas: 2", "minReplicas: 1", "fewer than 2 replicas"),
        // Scaling on memory, not CPU.
        ("name: cpu\n", "name: memory\n", "does not follow CPU"),
        // No CPU request to measure utilisation against.
        (
            "requests: {cpu: 500m, memory: 256Mi}",
            "requests: {memory: 256Mi}",
            "no CPU request",
        ),
        // A key per replica: sessions could not move.
        (
            "signing_key = { file = \"/var/run/secrets/myquic/session-key\" }",
            "",
            "signing_key must be a file from a mounted Secret",
        ),
        // No autoscaler at all.
        (
            "kind: HorizontalPodAutoscaler",
            "kind: HorizontalPodAutoscalerX",
            "no HorizontalPodAutoscaler",
        ),
    ] {
        let path = broken(dir.path(), "gateway.yaml", from, to);
        let (ok, text) = validate(&[&path]);
        assert!(!ok && text.contains(complaint), "{from:?} → {to:?}: {text}");
    }
}
