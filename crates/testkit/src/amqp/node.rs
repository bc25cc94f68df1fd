//! The local RabbitMQ node itself, for the tests that stop and start it or give it vhosts,
//! users and definitions of their own.

use std::process::Command;

/// Runs `rabbitmqctl <args>` on the local node and returns what it printed, failing loudly when
/// it cannot.
pub fn rabbitmqctl(args: &[&str]) -> String {
    let output = Command::new("rabbitmqctl")
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run rabbitmqctl {args:?} (RabbitMQ's control tool): {e}")
        });
    assert!(
        output.status.success(),
        "rabbitmqctl {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
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
