//! A datasource password that wipes itself and never prints.

use std::fmt;

use zeroize::Zeroizing;

/// A datasource password. The text is zeroed when the value is dropped; `Debug` prints
/// `Password(<redacted>)` and there is no `Display`, so it cannot end up in a log line or an
/// error text by accident. [`expose`](Self::expose) is the one way to read it, for the driver.
#[derive(Clone, Default)]
pub struct Password(Zeroizing<String>);

impl Password {
    pub fn new(text: impl Into<String>) -> Self {
        Password(Zeroizing::new(text.into()))
    }

    /// The password text, for handing to a driver. Do not log or format it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Password(<redacted>)")
    }
}

impl From<String> for Password {
    fn from(text: String) -> Self {
        Password::new(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_text() {
        let password = Password::new("hunter2-sentinel");
        assert_eq!(format!("{password:?}"), "Password(<redacted>)");
        assert_eq!(format!("{password:#?}"), "Password(<redacted>)");
        assert_eq!(password.expose(), "hunter2-sentinel");
    }

    #[test]
    fn default_is_empty() {
        assert!(Password::default().is_empty());
        assert!(!Password::new("x").is_empty());
    }
}
