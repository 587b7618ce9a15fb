"""Drives the webmail page in headless Chromium (selenium): sign in, see a
message delivered by SMTP, open it, reply with an attachment, and see a
new message appear in the list without a reload. Exits non-zero on any
failed step. Usage: webmail_browser.py HTTP_ADDR SMTP_ADDR USER PASSWORD SCREENSHOT ATTACHMENT
"""

import shutil
import smtplib
import sys
import tempfile
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

http, smtp, user, password, screenshot, attachment = sys.argv[1:7]

# Chromium's profile (~2 MB), removed at the end whatever happened.
profile = tempfile.mkdtemp(prefix="meshmail-chromium-")
opts = webdriver.ChromeOptions()
opts.binary_location = "/usr/bin/chromium"
for flag in [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,800",
    "--user-data-dir=" + profile,
]:
    opts.add_argument(flag)
driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
wait = WebDriverWait(driver, 20)


def step(name):
    print("step:", name, flush=True)


def message_with(subject):
    return (By.XPATH, "//ul[@id='messages']/li[contains(@class,'message')][.//div[@class='subject'][text()=%r]]" % subject)


try:
    step("sign in")
    driver.get("http://%s/" % http)
    driver.find_element(By.ID, "user").send_keys(user)
    driver.find_element(By.ID, "password").send_keys(password)
    driver.find_element(By.ID, "login-button").click()
    wait.until(EC.visibility_of_element_located((By.ID, "mail-view")))
    wait.until(EC.text_to_be_present_in_element((By.ID, "live"), "live"))

    step("see the SMTP message with its unread count")
    first = wait.until(EC.element_to_be_clickable(message_with("Hello from SMTP")))
    inbox = driver.find_element(By.CSS_SELECTOR, "#mailboxes li[data-role='inbox'] .count")
    assert inbox.text == "1", inbox.text
    assert "unread" in first.get_attribute("class")

    step("open it: the HTML part is shown as text, its script never runs")
    first.click()
    wait.until(EC.text_to_be_present_in_element((By.ID, "reader-body"), "Bold claim"))
    body = driver.find_element(By.ID, "reader-body")
    assert "<b>" not in body.text and "alert" not in body.text, body.text
    assert driver.execute_script("return window.pwned === undefined"), "a message script ran"
    assert not driver.find_elements(By.CSS_SELECTOR, "#reader-body *"), "HTML was injected"

    step("reply with an attachment")
    driver.find_element(By.ID, "reply-button").click()
    driver.find_element(By.ID, "body").send_keys("Sounds good, see attached.")
    driver.find_element(By.ID, "attachment").send_keys(attachment)
    driver.find_element(By.ID, "send-button").click()
    wait.until(EC.text_to_be_present_in_element((By.ID, "status"), "Sent to"))

    step("a new message appears without a reload")
    marker = driver.execute_script("window.noReload = 42; return window.noReload")
    s = smtplib.SMTP(*smtp.rsplit(":", 1))
    s.sendmail("erin@remote.test", [user], "From: Erin <erin@remote.test>\r\nTo: %s\r\nSubject: Live one\r\n\r\nPushed.\r\n" % user)
    s.quit()
    sent_at = time.monotonic()
    wait.until(EC.presence_of_element_located(message_with("Live one")))
    print("live update after %.0f ms" % ((time.monotonic() - sent_at) * 1000), flush=True)
    assert driver.execute_script("return window.noReload") == marker, "the page was reloaded"

    step("flag it")
    driver.find_element(*message_with("Live one")).click()
    wait.until(EC.text_to_be_present_in_element((By.ID, "reader-body"), "Pushed."))
    driver.find_element(By.ID, "flag-button").click()
    wait.until(EC.text_to_be_present_in_element((By.ID, "flag-button"), "Unflag"))
    driver.save_screenshot(screenshot)
    print("ok", flush=True)
finally:
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)
