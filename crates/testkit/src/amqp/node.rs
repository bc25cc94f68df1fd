//! The local RabbitMQ node itself, for the tests that stop and start it.

use std::process::Command;

/// Runs `rabbitmqctl <action>` on the local node, failing loudly when it cannot.
pub fn rabbitmqctl(action: &str) {
    let output = Command::new("rabbitmqctl")
        .arg(action)
        .output()
        .unwrap_or_else(|e| panic!("cannot run rabbitmqctl {action}: {e}"));
    assert!(
        output.status.success(),
        "rabbitmqctl {action} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Starts the broker app again when dropped while armed, so a failing test never leaves the
/// shared broker down.
pub struct RestartGuard {
    /// Whether dropping the guard runs `rabbitmqctl start_app`.
    pub armed: bool,
}

impl Drop for RestartGuard {
    fn drop(&mut self) {
        if self.armed {
            let _ = Command::new("rabbitmqctl").arg("start_app").output();
        }
    }
}
