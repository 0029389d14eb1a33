use crate::config::*;

fn no_env(_: &str) -> Option<String> {
    None
}

fn parse(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
    Config::parse(Path::new("test.toml"), text, env)
}

#[test]
fn the_shipped_file_loads_with_an_empty_environment() {
    let text = include_str!("../../config/chatgate.toml");
    let config = parse(text, &no_env).expect("shipped configuration parses");
    config.validate().expect("shipped configuration is valid");
    assert_eq!(config.server.listen, "127.0.0.1:8080");
    assert_eq!(config.storage.database_url.expose(), "sqlite://data/chatgate.db");
}

#[test]
fn variables_and_defaults_are_expanded_in_nested_values() {
    let env = |name: &str| (name == "PGHOST").then(|| "db.internal".to_owned());
    let config = parse(
        r#"
        [storage]
        database_url = "postgres://app@${PGHOST}:${PGPORT:-5432}/chatgate"
        "#,
        &env,
    )
    .expect("parses");
    assert_eq!(config.storage.database_url.expose(), "postgres://app@db.internal:5432/chatgate");
}

#[test]
fn an_unset_variable_names_its_key() {
    let err = parse("[evidence]\npseudonym_key = \"${KEY_NOT_SET}\"\n", &no_env).expect_err("unset");
    let text = err.to_string();
    assert!(text.contains("evidence.pseudonym_key") && text.contains("KEY_NOT_SET"), "{text}");
}

#[test]
fn unknown_keys_and_wrong_types_are_refused() {
    assert!(parse("[server]\nlisten_on = \"x\"\n", &no_env).is_err());
    assert!(parse("[server]\nrequest_timeout_ms = \"soon\"\n", &no_env).is_err());
    assert!(parse("[server\n", &no_env).is_err());
}

#[test]
fn environment_overrides_win_and_are_validated() {
    let env = |name: &str| match name {
        "CHATGATE_LISTEN" => Some("0.0.0.0:9000".to_owned()),
        "CHATGATE_DATABASE_URL" => Some("postgres://u:p@h/db".to_owned()),
        _ => None,
    };
    let mut config = Config::default();
    config.apply_env_overrides(&env);
    config.validate().expect("valid");
    assert_eq!(config.server.listen, "0.0.0.0:9000");
    assert_eq!(config.storage.database_url.backend(), Ok(BackendKind::Postgres));

    config.storage.database_url = DatabaseUrl::new("mysql://h/db");
    assert!(config.validate().is_err());
    config.storage.database_url = DatabaseUrl::new("sqlite://x.db");
    config.server.listen = "not-an-address".into();
    assert!(config.validate().is_err());
}

#[test]
fn a_missing_explicit_file_is_an_error_but_the_default_path_may_be_absent() {
    let missing = ConfigSource::Explicit(PathBuf::from("/nonexistent/chatgate.toml"));
    assert!(matches!(Config::load(&missing, &no_env), Err(ConfigError::Read { .. })));
}

#[test]
fn redacted_output_hides_secrets_and_passwords() {
    let mut config = Config::default();
    config.evidence.pseudonym_key = Secret::new("super-secret-key-material");
    config.storage.database_url = DatabaseUrl::new("postgres://app:hunter2@db/chatgate");
    let text = config.to_redacted_toml();
    assert!(!text.contains("super-secret") && !text.contains("hunter2"), "{text}");
    assert!(text.contains("postgres://app:redacted@db/chatgate"), "{text}");
    assert!(text.contains("pseudonym_key = \"<redacted>\""), "{text}");
    assert!(!format!("{config:?}").contains("hunter2"));
}
