//! [`Secret`]: a credential in memory that never prints (its `Debug` and `Display` say
//! `[redacted]`), and reading one from a file or an environment variable with errors that say
//! what is wrong and how to fix it, without the value.

use std::fmt;

use super::config::SecretSource;

/// A secret value. The only way to the text is [`Secret::expose`], called where the value goes
/// on the wire; nothing formats it.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Secret(String);

impl Secret {
    pub(crate) fn new(value: String) -> Secret {
        Secret(value)
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// Read the secret `s` names: the file's text or the variable's value, surrounding whitespace
/// trimmed. Absent or empty is an error (with the fix), never an empty credential.
pub(crate) fn read(s: &SecretSource) -> Result<Secret, String> {
    let value = match (&s.file, &s.env) {
        (Some(f), None) => std::fs::read_to_string(f).map_err(|e| {
            format!(
                "cannot read the secret file {}: {e}; create it (readable by the gateway) or point file: elsewhere",
                f.display()
            )
        })?,
        (None, Some(v)) => std::env::var(v).map_err(|_| {
            format!("the environment variable {v} is not set (or not UTF-8); set it where the gateway starts, or use file:")
        })?,
        _ => return Err("give exactly one of file: (a secret file) or env: (a variable name)".into()),
    };
    let value = value.trim();
    if value.is_empty() {
        let what = match (&s.file, &s.env) {
            (Some(f), _) => format!("the secret file {} is empty", f.display()),
            (_, Some(v)) => format!("the environment variable {v} is empty"),
            _ => unreachable!("checked above"),
        };
        return Err(format!("{what}; put the secret in it"));
    }
    Ok(Secret(value.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_never_formats() {
        let s = Secret::new("hunter2-very-secret".into());
        assert_eq!(format!("{s:?} {s}"), "Secret([redacted]) [redacted]");
        assert_eq!(s.expose(), "hunter2-very-secret");
    }

    #[test]
    fn missing_and_empty_secrets_are_refused_with_the_fix() {
        let dir = std::env::temp_dir().join(format!("mcp-edge-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty");
        std::fs::write(&empty, "\n").unwrap();
        let src = |f: &std::path::Path| SecretSource {
            file: Some(f.to_path_buf()),
            env: None,
        };
        let e = read(&src(&empty)).unwrap_err();
        assert!(
            e.contains("is empty") && e.contains("put the secret"),
            "{e}"
        );
        let e = read(&src(&dir.join("absent"))).unwrap_err();
        assert!(e.contains("cannot read the secret file"), "{e}");
        let env = SecretSource {
            file: None,
            env: Some("MCP_EDGE_TEST_NO_SUCH_VARIABLE".into()),
        };
        assert!(read(&env).unwrap_err().contains("is not set"));
        let full = dir.join("full");
        std::fs::write(&full, "  s3cr3t\n").unwrap();
        assert_eq!(read(&src(&full)).unwrap().expose(), "s3cr3t");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
