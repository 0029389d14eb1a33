//! A real browser for the console's tests: Debian's chromium, headless, driven over WebDriver
//! by Debian's chromedriver (`CHATGATE_TEST_CHROMEDRIVER`, which `.ci/run` sets after installing
//! both; nothing is downloaded at run time). Without the variable the browser tests say they
//! were skipped, as the PostgreSQL ones do.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;

pub const CHROMEDRIVER_ENV: &str = "CHATGATE_TEST_CHROMEDRIVER";

/// One browser at a time: two chromiums starting together on two busy cores can each take longer
/// than the tests wait for, and the tests would measure the machine, not the console.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

pub struct Browser {
    pub client: Client,
    driver: Child,
    _alone: tokio::sync::MutexGuard<'static, ()>,
}

impl Browser {
    /// A fresh headless chromium, or `None` (with a line saying so) when no chromedriver is set.
    pub async fn open() -> Option<Self> {
        let Ok(driver_path) = std::env::var(CHROMEDRIVER_ENV) else {
            eprintln!("skipped: set {CHROMEDRIVER_ENV} (e.g. /usr/bin/chromedriver) to run the browser tests");
            return None;
        };
        let alone = ONE_AT_A_TIME.lock().await;
        // It chooses its own port and says which ("... started successfully on port N."): a port
        // picked here and handed over could be taken meanwhile by another test's server.
        let mut driver = Command::new(&driver_path)
            .arg("--port=0")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{driver_path} does not start: {e}"));
        let stdout = std::io::BufReader::new(driver.stdout.take().expect("stdout"));
        let (said, port) = std::sync::mpsc::channel();
        // Read on to the end, so that chromedriver never writes into a closed pipe.
        std::thread::spawn(move || {
            for line in std::io::BufRead::lines(stdout).map_while(Result::ok) {
                if let Some(rest) = line.strip_prefix("ChromeDriver was started successfully on port ") {
                    let _ = said.send(rest.trim_end_matches('.').parse::<u16>().ok());
                }
            }
        });
        let port = port.recv_timeout(Duration::from_secs(60)).ok().flatten().expect("chromedriver says its port");
        let binary = std::env::var("CHATGATE_TEST_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
        let options = json!({
            "binary": binary,
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,1000", "--lang=en-US"],
        });
        let mut capabilities = serde_json::Map::new();
        capabilities.insert("goog:chromeOptions".into(), options);
        let url = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(60);
        let client = loop {
            let mut builder = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new());
            match builder.capabilities(capabilities.clone()).connect(&url).await {
                Ok(client) => break client,
                Err(e) if Instant::now() > deadline => panic!("chromedriver at {url} gives no session: {e}"),
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        };
        Some(Self { client, driver, _alone: alone })
    }

    pub async fn goto(&self, url: &str) {
        self.client.goto(url).await.unwrap_or_else(|e| panic!("open {url}: {e}"));
    }

    /// The element `css` selects, waiting (10 s at most) for a page that is still coming.
    pub async fn find(&self, css: &str) -> fantoccini::elements::Element {
        let wait = self.client.wait().at_most(Duration::from_secs(10)).every(Duration::from_millis(50));
        match wait.for_element(Locator::Css(css)).await {
            Ok(element) => element,
            Err(e) => {
                let page = match self.client.find(Locator::Css("main")).await {
                    Ok(main) => main.text().await.unwrap_or_default(),
                    Err(_) => String::new(),
                };
                panic!("no `{css}` on {}: {e}\n{page}", self.path().await)
            }
        }
    }

    pub async fn text(&self, css: &str) -> String {
        self.find(css).await.text().await.unwrap_or_else(|e| panic!("text of `{css}`: {e}"))
    }

    pub async fn click(&self, css: &str) {
        self.find(css).await.click().await.unwrap_or_else(|e| panic!("click `{css}`: {e}"));
    }

    pub async fn type_into(&self, css: &str, text: &str) {
        self.find(css).await.send_keys(text).await.unwrap_or_else(|e| panic!("type into `{css}`: {e}"));
    }

    pub async fn path(&self) -> String {
        self.client.current_url().await.expect("url").path().to_owned()
    }

    /// Waits (10 s at most) for the browser to leave `from`; the path it went to.
    pub async fn left(&self, from: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let path = self.path().await;
            let ready = self.client.execute("return document.readyState", vec![]).await.ok();
            if path != from && ready == Some(json!("complete")) {
                return path;
            }
            assert!(Instant::now() < deadline, "still on {from}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits (10 s at most) until the text of `css` satisfies `wanted`; the last text otherwise.
    pub async fn wait_text(&self, css: &str, what: &str, wanted: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let text = match self.client.find(Locator::Css(css)).await {
                Ok(element) => element.text().await.unwrap_or_default(),
                Err(_) => String::new(),
            };
            if wanted(&text) {
                return text;
            }
            assert!(Instant::now() < deadline, "waited for {what} in `{css}`; it reads {text:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The page's script hit no error (the console shows a banner when one does).
    pub async fn no_script_error(&self) {
        let hidden = self.client.execute("return document.getElementById('page-error')?.hidden ?? true", vec![]).await;
        assert_eq!(hidden.expect("script runs"), json!(true), "the page's script failed on {}", self.path().await);
    }

    /// A screenshot of the page as `name.png` under `target/console-screenshots/`, and under
    /// `docs/console/` too when `CHATGATE_UPDATE_SCREENSHOTS` is set.
    pub async fn screenshot(&mut self, name: &str) {
        let png = self.client.screenshot().await.expect("screenshot");
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let mut folders = vec![root.join("target/console-screenshots")];
        if std::env::var_os("CHATGATE_UPDATE_SCREENSHOTS").is_some() {
            folders.push(root.join("docs/console"));
        }
        for folder in folders {
            std::fs::create_dir_all(&folder).expect("screenshot folder");
            let path = folder.join(format!("{name}.png"));
            std::fs::write(&path, &png).expect("write screenshot");
        }
    }

    pub async fn close(mut self) {
        let _ = self.client.clone().close().await;
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
